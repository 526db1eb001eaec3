//! `onic run --xsk MODE`: AF_XDP zero copy over the model, as a user moving from DPDK would run
//! `xdpsock`. The scenario (`onic_embed::model::xsk_app`, which the bare-metal image runs too):
//! one port with its wire open (the run plays the peer), every RSS entry steered to
//! `--xsk-queue`, an AF_XDP socket bound to that queue with a UMEM in this process and its rings
//! laid out as the kernel lays them out, the queue switched to the UMEM through the port, and an
//! XDP program that redirects every frame to the socket of its queue; rxdrop, txonly or l2fwd,
//! every byte checked; chunks of 4 KiB or 2 KiB (`--xsk-chunk-size`). At the end the strict census
//! accounts for every chunk of the UMEM, no chunk was written past its end, and the model must
//! have no page left.

use std::time::Instant;

use clap::{Args, ValueEnum};
use onic_embed::model::xsk_app::{run_xsk, XskMode as Mode, XskRun};
use onic_sim::{Card, CardConfig, Wire};

/// What the application does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum XskMode {
    /// Receive and drop (the chunk back to the fill ring).
    Rxdrop,
    /// Transmit generated frames.
    Txonly,
    /// Receive, swap the MAC addresses, send back from the same chunk.
    L2fwd,
}

impl From<XskMode> for Mode {
    fn from(m: XskMode) -> Self {
        match m {
            XskMode::Rxdrop => Self::Rxdrop,
            XskMode::Txonly => Self::Txonly,
            XskMode::L2fwd => Self::L2fwd,
        }
    }
}

/// Options of the XSK mode.
#[derive(Args, Debug)]
pub struct XskOpts {
    /// Run AF_XDP zero copy on one queue of the model in this mode.
    #[arg(long, value_enum)]
    pub xsk: Option<XskMode>,
    /// The queue the socket is bound to (below --queues).
    #[arg(long, default_value_t = 0)]
    pub xsk_queue: u16,
    /// Frames to receive or send, 1..=10000000.
    #[arg(long, default_value_t = 20_000)]
    pub xsk_frames: u64,
    /// Chunks of the UMEM, 256..=65536.
    #[arg(long, default_value_t = 4096)]
    pub xsk_chunks: u32,
    /// Bytes of a chunk: 4096, or 2048 (DPDK's AF_XDP default; 1792-byte RX buffers).
    #[arg(long, default_value_t = 4096)]
    pub xsk_chunk_size: u32,
    /// Frames per batch: what the peer sends between polls, and the application's burst.
    #[arg(long, default_value_t = 32)]
    pub xsk_batch: usize,
}

/// Runs the XSK mode.
pub fn run(opts: &XskOpts, mode: XskMode, queues: u16, sizes: &[usize]) -> Result<(), String> {
    let run = XskRun {
        queues,
        queue: opts.xsk_queue,
        frames: opts.xsk_frames,
        chunks: opts.xsk_chunks,
        chunk_size: opts.xsk_chunk_size,
        batch: opts.xsk_batch,
        sizes,
    };
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let start = Instant::now();
    let r = run_xsk(&card, &card, &run, mode.into())?;
    let secs = start.elapsed().as_secs_f64();
    let live = card.dma_stats().live_pages;
    if live != 0 {
        return Err(format!("{live} pages of the model were not freed"));
    }
    let (c, census, stats) = (r.counts, r.census, r.stats);
    outln!(
        "xsk {mode:?} on queue {} of {queues}, chunks of {} bytes",
        opts.xsk_queue,
        opts.xsk_chunk_size
    );
    outln!(
        "xsk: sent {} rx {} tx {} egress {} completed {}",
        c.sent,
        c.rx,
        c.tx,
        c.egress,
        c.completed
    );
    outln!(
        "umem: {} chunks: idle {} fill {} rx {} completion {} tx {} free {}; fill taken {} invalid {}, rx delivered {} ring full {}, tx taken {} invalid {}, completed {}",
        census.idle + census.fill + census.rx + census.comp + census.tx + census.free,
        census.idle,
        census.fill,
        census.rx,
        census.comp,
        census.tx,
        census.free,
        stats.fill_taken,
        stats.fill_invalid,
        stats.rx_delivered,
        stats.rx_ring_full,
        stats.tx_taken,
        stats.tx_invalid,
        stats.completed
    );
    outln!(
        "rate: {:.0} frames/s (host time, model and driver)",
        c.rx.max(c.tx) as f64 / secs.max(1e-9)
    );
    outln!("xsk: ok");
    Ok(())
}
