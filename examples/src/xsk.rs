//! `onic run --xsk MODE`: AF_XDP zero copy over the model, as a user moving from DPDK would run
//! `xdpsock`: one port (PF0, port 0, its wire open: the run plays the peer), every RSS entry
//! steered to one queue (`--xsk-queue`, as `ethtool -X` or `-N` would), an AF_XDP socket bound to
//! that queue with a UMEM in this process and its fill, RX, TX and completion rings laid out as
//! the kernel lays them out (`onic_embed::model::XskSocket`), the queue switched to the UMEM
//! through the port (`Port::set_queue_source`, what `XDP_SETUP_XSK_POOL` does), and an XDP
//! program that redirects every frame to the socket of its queue.
//!
//! - **rxdrop**: the peer sends; the application reads each frame from its RX ring, checks it
//!   byte for byte and puts the chunk back in the fill ring;
//! - **txonly**: the application writes frames into idle chunks and puts them in its TX ring; the
//!   driver sends them from the UMEM; the peer checks each byte for byte; completions go back to
//!   the idle list;
//! - **l2fwd**: the peer sends; the application swaps the MAC addresses in place and sends each
//!   frame back from the chunk it arrived in; the peer checks the echo byte for byte.
//!
//! At the end the queue goes back to its page pool, the census checks that every chunk of the
//! UMEM is the application's and named exactly once (idle, fill, RX or completion ring: no chunk
//! lost or doubled), the socket unbinds and the model must have no page left.

use std::time::Instant;

use clap::{Args, ValueEnum};
use onic_core::queue::source::SourceKind;
use onic_core::xdp::{XdpAction, XdpBuff};
use onic_core::RingSizeIdx;
use onic_embed::model::{CardHost, ModelHost, XskConfig};
use onic_embed::port::{PortConfig, SoloPort, RSS_INDIR_SIZE};
use onic_sim::{Card, CardConfig, Wire};

type Prog = Box<dyn FnMut(&mut XdpBuff<'_>) -> XdpAction>;
type Host<'c> = CardHost<'c, Prog>;

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
    /// Chunks of the UMEM (4 KiB each), 256..=65536.
    #[arg(long, default_value_t = 4096)]
    pub xsk_chunks: u32,
    /// Frames per batch: what the peer sends between polls, and the application's burst.
    #[arg(long, default_value_t = 32)]
    pub xsk_batch: usize,
}

/// Entries of each of the socket's rings.
const RING: u32 = 2048;

/// What a run counted.
#[derive(Default, Debug)]
struct Counts {
    /// Frames the peer sent.
    sent: u64,
    /// Frames the application read from its RX ring.
    rx: u64,
    /// Frames the application put in its TX ring.
    tx: u64,
    /// Frames the peer received from the port.
    egress: u64,
    /// Addresses the application took from the completion ring.
    completed: u64,
}

/// A frame of `len` bytes: MACs, IPv4/UDP with the sequence number in the source port and the
/// payload, a pattern of the sequence number after.
fn frame(seq: u64, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seq) as u8)
        .collect();
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0b]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[20..22].copy_from_slice(&[0, 0]);
    f[23] = 17;
    f[34..36].copy_from_slice(&(seq as u16).to_be_bytes());
    f[42..50].copy_from_slice(&seq.to_le_bytes());
    f
}

/// The sequence number of a frame (`frame`'s layout).
fn seq_of(f: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(f.get(42..50)?.try_into().ok()?))
}

/// `f` with its MAC addresses swapped (l2fwd's echo).
fn swapped(f: &[u8]) -> Vec<u8> {
    let mut s = f.to_vec();
    s[..6].copy_from_slice(&f[6..12]);
    s[6..12].copy_from_slice(&f[..6]);
    s
}

fn check(opts: &XskOpts, queues: u16, sizes: &[usize]) -> Result<(), String> {
    if opts.xsk_queue >= queues {
        return Err(format!(
            "--xsk-queue {} is not below --queues {queues}",
            opts.xsk_queue
        ));
    }
    if !(1..=10_000_000).contains(&opts.xsk_frames) {
        return Err("--xsk-frames: 1..=10000000".into());
    }
    if !(256..=65536).contains(&opts.xsk_chunks) {
        return Err("--xsk-chunks: 256..=65536".into());
    }
    if !(1..=256).contains(&opts.xsk_batch) {
        return Err("--xsk-batch: 1..=256".into());
    }
    if sizes.is_empty() || sizes.iter().any(|s| !(64..=1518).contains(s)) {
        return Err("--sizes: frame sizes 64..=1518 on the wire".into());
    }
    Ok(())
}

/// The largest RX ring that holds at most a quarter of `chunks`.
fn rx_ring_for(chunks: u32) -> Result<RingSizeIdx, String> {
    (1..16)
        .filter_map(|i| RingSizeIdx::new(i).ok())
        .filter(|r| u32::from(r.entries()) <= chunks / 4)
        .max_by_key(|r| r.entries())
        .ok_or_else(|| format!("--xsk-chunks {chunks}: too few for the smallest RX ring"))
}

/// Entries the application keeps in the fill ring: half the UMEM (at most the ring).
fn fill_level(chunks: u32) -> usize {
    (chunks / 2).min(RING) as usize
}

/// The frame length of frame `seq` (`sizes` on the wire, FCS included).
fn len_of(sizes: &[usize], seq: u64) -> usize {
    sizes[(seq % sizes.len() as u64) as usize] - 4
}

struct Rig<'c> {
    card: &'c Card,
    host: Host<'c>,
    port: SoloPort<Host<'c>>,
    prog: u16,
    q: u16,
}

impl<'c> Rig<'c> {
    fn new(card: &'c Card, queues: u16, opts: &XskOpts) -> Result<Self, String> {
        let host: Host<'_> = ModelHost::new(card);
        // The RX ring holds at most a quarter of the UMEM, the fill ring half: the application
        // always has chunks to refill with and to send from (as xdpsock sizes its UMEM).
        let ring = rx_ring_for(opts.xsk_chunks)?;
        let cfg = PortConfig {
            func: 0,
            max_queues: queues,
            queues,
            tx_ring: ring,
            rx_ring: ring,
            rs_fec: true,
        };
        let mut port =
            SoloPort::new(host.regs(0), host.delay(), host.clone(), cfg).map_err(|e| format!("port: {e}"))?;
        port.open().map_err(|e| format!("open: {e}"))?;
        let q = opts.xsk_queue;
        let table = [u32::from(q); RSS_INDIR_SIZE];
        port.control(|p, c| p.rss_set(c, Some(&table), None))
            .map_err(|e| format!("RSS: {e}"))?;
        let xcfg = XskConfig {
            chunks: opts.xsk_chunks,
            headroom: 0,
            rings: [RING; 4],
        };
        host.xsk_bind(q, xcfg).map_err(|e| format!("bind: {e}"))?;
        host.with_xsk(q, |s| s.app_fill(fill_level(s.chunks())));
        port.set_queue_source(q, SourceKind::Xsk)
            .map_err(|e| format!("XSK source: {e}"))?;
        let prog: Prog = Box::new(move |x: &mut XdpBuff<'_>| x.redirect(u32::from(q)));
        let prog = host.attach(prog);
        Ok(Self {
            card,
            host,
            port,
            prog,
            q,
        })
    }

    /// Lets the model work and polls the queue until nothing moves.
    fn settle(&mut self) {
        for _ in 0..64 {
            self.card.run_until_idle();
            self.card.advance_time(5_000);
            self.card.run_until_idle();
            let r = self.port.poll(self.q, 64, (), Some(self.prog));
            if r.done == 0 && !r.tx_pending {
                return;
            }
        }
    }

    /// What left port 0, checked against `want` (by sequence number).
    fn egress(&self, want: impl Fn(u64) -> Vec<u8>, c: &mut Counts) -> Result<(), String> {
        for f in self.card.take_egress(0) {
            let seq = seq_of(&f).ok_or("a frame too short left the port")?;
            if f != want(seq) {
                return Err(format!("frame {seq} left the port changed"));
            }
            c.egress += 1;
        }
        Ok(())
    }
}

/// The application reads its RX ring: each frame checked, then dropped (its chunk back to the
/// fill ring) or, with `fwd`, sent back with the MACs swapped.
fn read_rx(rig: &Rig<'_>, sizes: &[usize], fwd: bool, c: &mut Counts) -> Result<(), String> {
    let r = rig.host.with_xsk(rig.q, |s| -> Result<(), String> {
        while let Some(d) = s.app_take_rx() {
            let f = s.frame(d).map_err(|e| e.to_string())?;
            let seq = seq_of(&f).ok_or("a short frame in the RX ring")?;
            if f != frame(seq, len_of(sizes, seq)) {
                return Err(format!("frame {seq} arrived changed"));
            }
            c.rx += 1;
            if fwd {
                s.with_chunk(d.addr, |b| {
                    let off = (d.addr % 4096) as usize;
                    let (dst, src) = b[off..off + 12].split_at_mut(6);
                    dst.swap_with_slice(src);
                })
                .map_err(|e| e.to_string())?;
                if s.app_tx(d).is_err() {
                    return Err("the TX ring is full".into());
                }
                c.tx += 1;
            } else {
                s.app_release(d.addr);
            }
        }
        c.completed += s.app_reap() as u64;
        let want = fill_level(s.chunks()).saturating_sub(s.fill.len() as usize);
        s.app_fill(want);
        Ok(())
    });
    r.ok_or("no socket")?
}

fn run_rx(rig: &mut Rig<'_>, opts: &XskOpts, sizes: &[usize], fwd: bool) -> Result<Counts, String> {
    let mut c = Counts::default();
    while c.sent < opts.xsk_frames {
        let n = (opts.xsk_frames - c.sent).min(opts.xsk_batch as u64);
        for seq in c.sent..c.sent + n {
            rig.card.inject(0, &frame(seq, len_of(sizes, seq)));
        }
        c.sent += n;
        rig.settle();
        read_rx(rig, sizes, fwd, &mut c)?;
        rig.settle();
        rig.egress(|s| swapped(&frame(s, len_of(sizes, s))), &mut c)?;
    }
    rig.settle();
    read_rx(rig, sizes, fwd, &mut c)?;
    Ok(c)
}

fn run_tx(rig: &mut Rig<'_>, opts: &XskOpts, sizes: &[usize]) -> Result<Counts, String> {
    let mut c = Counts::default();
    while c.tx < opts.xsk_frames {
        let n = (opts.xsk_frames - c.tx).min(opts.xsk_batch as u64);
        let put = rig
            .host
            .with_xsk(rig.q, |s| {
                let mut put = 0;
                for seq in c.tx..c.tx + n {
                    if !s.app_send(&frame(seq, len_of(sizes, seq))) {
                        break;
                    }
                    put += 1;
                }
                put
            })
            .ok_or("no socket")?;
        c.tx += put;
        rig.settle();
        rig.egress(|s| frame(s, len_of(sizes, s)), &mut c)?;
        c.completed += rig.host.with_xsk(rig.q, |s| s.app_reap()).unwrap_or(0) as u64;
        if put == 0 && c.completed == c.tx {
            return Err("the application could not send: no idle chunk".into());
        }
    }
    Ok(c)
}

/// Back to the page pool, the strict census, unbind, teardown, the model's page count.
fn finish(mut rig: Rig<'_>, c: &mut Counts) -> Result<String, String> {
    rig.settle();
    c.completed += rig.host.with_xsk(rig.q, |s| s.app_reap()).unwrap_or(0) as u64;
    rig.port
        .set_queue_source(rig.q, SourceKind::Pages)
        .map_err(|e| format!("page source: {e}"))?;
    let census = rig
        .host
        .with_xsk(rig.q, |s| s.census_strict(None))
        .ok_or("no socket")?
        .map_err(|e| format!("census: {e}"))?;
    let stats = rig.host.xsk_unbind(rig.q).map_err(|e| format!("unbind: {e}"))?;
    let line = format!(
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
    let card = rig.card;
    rig.port.remove();
    rig.host.free_spare();
    let live = card.dma_stats().live_pages;
    if live != 0 {
        return Err(format!("{live} pages of the model were not freed"));
    }
    Ok(line)
}

/// Runs the XSK mode.
pub fn run(opts: &XskOpts, mode: XskMode, queues: u16, sizes: &[usize]) -> Result<(), String> {
    check(opts, queues, sizes)?;
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let mut rig = Rig::new(&card, queues, opts)?;
    let start = Instant::now();
    let mut c = match mode {
        XskMode::Rxdrop => run_rx(&mut rig, opts, sizes, false)?,
        XskMode::L2fwd => run_rx(&mut rig, opts, sizes, true)?,
        XskMode::Txonly => run_tx(&mut rig, opts, sizes)?,
    };
    let secs = start.elapsed().as_secs_f64();
    let umem = finish(rig, &mut c)?;
    let frames = c.rx.max(c.tx);
    outln!("xsk {mode:?} on queue {} of {queues}", opts.xsk_queue);
    outln!(
        "xsk: sent {} rx {} tx {} egress {} completed {}",
        c.sent,
        c.rx,
        c.tx,
        c.egress,
        c.completed
    );
    outln!("{umem}");
    outln!(
        "rate: {:.0} frames/s (host time, model and driver)",
        frames as f64 / secs.max(1e-9)
    );
    let want = match mode {
        XskMode::Rxdrop => c.rx == c.sent && c.egress == 0,
        XskMode::Txonly => c.egress == c.tx && c.completed == c.tx,
        XskMode::L2fwd => c.rx == c.sent && c.egress == c.sent && c.completed == c.tx,
    };
    if !want {
        return Err(format!("xsk: counts do not agree: {c:?}"));
    }
    outln!("xsk: ok");
    Ok(())
}
