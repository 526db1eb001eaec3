//! AF_XDP zero copy on bare metal: the scenario of `onic run --xsk`
//! (`onic_embed::model::xsk_app`) on a fresh card with port 0's wire open, in each of its modes.
//! A socket with a UMEM in the image's heap is bound to one queue, the queue is switched to the
//! UMEM through the port, and an XDP program redirects every frame to it:
//!
//! - rxdrop: every frame the peer sends arrives in the socket's RX ring, byte for byte;
//! - l2fwd: every frame goes back out of the chunk it arrived in, MACs swapped, byte for byte;
//! - txonly: every frame the application writes into its UMEM leaves the port, byte for byte,
//!   and is completed.
//!
//! Each mode runs with 4 KiB chunks (`xsk-rxdrop`, ...) and with 2 KiB chunks, DPDK's AF_XDP
//! default, which take the driver's 1792-byte C2H buffers (`xsk-rxdrop-2k`, ...). After each: the
//! strict census of the UMEM (every chunk the application's, named exactly once), no chunk written
//! past its end, the socket unbound, the port removed and every page of the model freed, with no
//! model violation.

use onic_embed::model::xsk_app::{run_xsk, XskMode, XskRun};
use onic_sim::{Card, CardConfig, Wire};

use super::Runner;
use crate::model::Model;

/// Frame sizes on the wire the runs take in turn.
const SIZES: [usize; 4] = [64, 128, 600, 1518];

/// Runs the group: the three modes with 4 KiB chunks, then with 2 KiB chunks, each on a fresh
/// card.
pub fn run(r: &mut Runner) {
    r.group("AF_XDP zero copy (onic_embed's XSK source) on the model: rxdrop, l2fwd, txonly; 4 KiB and 2 KiB chunks");
    for (name, mode, chunk_size) in [
        ("xsk-rxdrop", XskMode::Rxdrop, 4096),
        ("xsk-l2fwd", XskMode::L2fwd, 4096),
        ("xsk-txonly", XskMode::Txonly, 4096),
        ("xsk-rxdrop-2k", XskMode::Rxdrop, 2048),
        ("xsk-l2fwd-2k", XskMode::L2fwd, 2048),
        ("xsk-txonly-2k", XskMode::Txonly, 2048),
    ] {
        one(r, name, mode, chunk_size);
    }
}

/// One mode with chunks of `chunk_size` bytes on a fresh card: the run's own checks, then the
/// card's census.
fn one(r: &mut Runner, name: &'static str, mode: XskMode, chunk_size: u32) {
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let run = XskRun {
        queues: 2,
        queue: 1,
        frames: 600,
        chunks: 512,
        chunk_size,
        batch: 32,
        sizes: &SIZES,
    };
    let result = {
        let model = Model::new(&card);
        run_xsk(&model, &model, &run, mode)
    };
    let d = card.dma_stats();
    let home = d.live_pages == 0 && d.live_regions == 0 && card.violations().is_empty();
    match result {
        Ok(rep) => {
            let c = rep.counts;
            r.check(
                name,
                home,
                format_args!(
                    "sent {} rx {} tx {} out {} completed {}; umem: fill taken {} rx delivered {} tx taken {}; after removal {} pages, {} rings live, {} model violations",
                    c.sent,
                    c.rx,
                    c.tx,
                    c.egress,
                    c.completed,
                    rep.stats.fill_taken,
                    rep.stats.rx_delivered,
                    rep.stats.tx_taken,
                    d.live_pages,
                    d.live_regions,
                    card.violations().len()
                ),
            );
        }
        Err(e) => {
            r.check(name, false, format_args!("{}", e));
        }
    }
}
