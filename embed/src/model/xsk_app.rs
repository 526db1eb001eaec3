//! An AF_XDP application over the model, as a user moving from DPDK runs `xdpsock`: one port
//! (PF0, port 0, its wire open: the scenario plays the peer), every RSS entry steered to one
//! queue (as `ethtool -X` or `-N` would), an [`XskSocket`](super::XskSocket) bound to that queue, the queue
//! switched to the UMEM through the port (`Port::set_queue_source`, what `XDP_SETUP_XSK_POOL`
//! does), and an XDP program that redirects every frame to the socket of its queue.
//!
//! - [`XskMode::Rxdrop`]: the peer sends; the application reads each frame from its RX ring,
//!   checks it byte for byte and puts the chunk back in the fill ring;
//! - [`XskMode::Txonly`]: the application writes frames into idle chunks and puts them in its
//!   TX ring; the driver sends them from the UMEM; the peer checks each byte for byte;
//!   completions go back to the idle list;
//! - [`XskMode::L2fwd`]: the peer sends; the application swaps the MAC addresses in place and
//!   sends each frame back from the chunk it arrived in; the peer checks the echo byte for byte.
//!
//! The UMEM's chunks are 2 KiB (DPDK's AF_XDP default, 1792-byte C2H buffers) or 4 KiB
//! ([`XskRun::chunk_size`]). At the end the queue goes back to its page pool, the strict census
//! checks that every chunk of the UMEM is the application's and named exactly once (idle, fill,
//! RX or completion ring: no chunk lost or doubled), no chunk was written past its end
//! ([`XskSocket::overruns`](super::XskSocket::overruns)), the socket unbinds and the port is
//! removed. `onic run --xsk` and
//! the bare-metal image's zero-copy group run this one scenario; each checks afterwards that
//! the model has no page left.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use onic_core::queue::source::SourceKind;
use onic_core::xdp::{XdpAction, XdpBuff};
use onic_core::RingSizeIdx;
use onic_sim::Card;

use super::{ModelAccess, ModelHost, XskCensus, XskConfig, XskStats, CHUNK_SIZES};
use crate::port::{PortConfig, SoloPort, RSS_INDIR_SIZE};

/// The program the scenario attaches: a redirect to the socket of the queue.
pub type XskProg = Box<dyn FnMut(&mut XdpBuff<'_>) -> XdpAction>;

/// How the scenario reaches the card itself (the peer's end of the wire and the model's clock),
/// beside the windows its host uses: directly, or with the image's interrupts held off.
pub trait CardAccess {
    /// Runs `f` on the card.
    fn with_card<R>(&self, f: impl FnOnce(&Card) -> R) -> R;
}

impl CardAccess for &Card {
    fn with_card<R>(&self, f: impl FnOnce(&Card) -> R) -> R {
        f(self)
    }
}

/// What the application does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XskMode {
    /// Receive and drop (the chunk back to the fill ring).
    Rxdrop,
    /// Transmit generated frames.
    Txonly,
    /// Receive, swap the MAC addresses, send back from the same chunk.
    L2fwd,
}

/// A run's settings (the caller has checked their ranges: [`XskRun::check`]).
#[derive(Clone, Debug)]
pub struct XskRun<'s> {
    /// Queue indices of the port.
    pub queues: u16,
    /// The queue the socket is bound to.
    pub queue: u16,
    /// Frames to receive or send.
    pub frames: u64,
    /// Chunks of the UMEM.
    pub chunks: u32,
    /// Bytes of a chunk: one of [`CHUNK_SIZES`].
    pub chunk_size: u32,
    /// Frames per batch: what the peer sends between polls, and the application's burst.
    pub batch: usize,
    /// Frame sizes on the wire (FCS included), in turn.
    pub sizes: &'s [usize],
}

impl XskRun<'_> {
    /// Refuses settings outside what the scenario supports, saying which.
    pub fn check(&self) -> Result<(), String> {
        if self.queue >= self.queues {
            return Err(format!(
                "--xsk-queue {} is not below --queues {}",
                self.queue, self.queues
            ));
        }
        if !(1..=10_000_000).contains(&self.frames) {
            return Err("--xsk-frames: 1..=10000000".into());
        }
        if !(256..=65536).contains(&self.chunks) {
            return Err("--xsk-chunks: 256..=65536".into());
        }
        if !CHUNK_SIZES.contains(&self.chunk_size) {
            return Err(format!("--xsk-chunk-size {}: 2048 or 4096", self.chunk_size));
        }
        if !(1..=256).contains(&self.batch) {
            return Err("--xsk-batch: 1..=256".into());
        }
        if self.sizes.is_empty() || self.sizes.iter().any(|s| !(64..=1518).contains(s)) {
            return Err("--sizes: frame sizes 64..=1518 on the wire".into());
        }
        Ok(())
    }

    /// The frame length of frame `seq` (FCS left out).
    fn len_of(&self, seq: u64) -> usize {
        self.sizes[(seq % self.sizes.len() as u64) as usize] - 4
    }
}

/// What a run counted.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct XskCounts {
    /// Frames the peer sent.
    pub sent: u64,
    /// Frames the application read from its RX ring.
    pub rx: u64,
    /// Frames the application put in its TX ring.
    pub tx: u64,
    /// Frames the peer received from the port.
    pub egress: u64,
    /// Addresses the application took from the completion ring.
    pub completed: u64,
}

impl XskCounts {
    /// Whether the counts are what `mode` must give: every frame read, sent and completed.
    #[must_use]
    pub const fn agree(&self, mode: XskMode) -> bool {
        match mode {
            XskMode::Rxdrop => self.rx == self.sent && self.egress == 0,
            XskMode::Txonly => self.egress == self.tx && self.completed == self.tx,
            XskMode::L2fwd => self.rx == self.sent && self.egress == self.sent && self.completed == self.tx,
        }
    }
}

/// What a finished run reports: its counts, the UMEM's strict census, the socket's statistics.
#[derive(Clone, Debug)]
pub struct XskReport {
    /// The counts.
    pub counts: XskCounts,
    /// Where every chunk was at the end.
    pub census: XskCensus,
    /// The socket's statistics.
    pub stats: XskStats,
}

/// Entries of each of the socket's rings.
const RING: u32 = 2048;

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

struct Rig<'r, C: CardAccess, A: ModelAccess> {
    card: C,
    host: ModelHost<XskProg, A>,
    port: SoloPort<ModelHost<XskProg, A>>,
    prog: u16,
    run: &'r XskRun<'r>,
}

impl<'r, C: CardAccess, A: ModelAccess> Rig<'r, C, A> {
    fn new(card: C, access: A, run: &'r XskRun<'r>) -> Result<Self, String> {
        let host: ModelHost<XskProg, A> = ModelHost::new(access);
        // The RX ring holds at most a quarter of the UMEM, the fill ring half: the application
        // always has chunks to refill with and to send from (as xdpsock sizes its UMEM).
        let ring = rx_ring_for(run.chunks)?;
        let cfg = PortConfig {
            func: 0,
            max_queues: run.queues,
            queues: run.queues,
            tx_ring: ring,
            rx_ring: ring,
            rs_fec: true,
        };
        let mut port =
            SoloPort::new(host.regs(0), host.delay(), host.clone(), cfg).map_err(|e| format!("port: {e}"))?;
        port.open().map_err(|e| format!("open: {e}"))?;
        let q = run.queue;
        let table = [u32::from(q); RSS_INDIR_SIZE];
        port.control(|p, c| p.rss_set(c, Some(&table), None))
            .map_err(|e| format!("RSS: {e}"))?;
        let xcfg = XskConfig {
            chunks: run.chunks,
            chunk_size: run.chunk_size,
            headroom: 0,
            rings: [RING; 4],
        };
        host.xsk_bind(q, xcfg).map_err(|e| format!("bind: {e}"))?;
        host.with_xsk(q, |s| s.app_fill(fill_level(s.chunks())));
        port.set_queue_source(q, SourceKind::Xsk)
            .map_err(|e| format!("XSK source: {e}"))?;
        let prog: XskProg = Box::new(move |x: &mut XdpBuff<'_>| x.redirect(u32::from(q)));
        let prog = host.attach(prog);
        Ok(Self {
            card,
            host,
            port,
            prog,
            run,
        })
    }

    /// Lets the model work and polls the queue until nothing moves.
    fn settle(&mut self) {
        for _ in 0..64 {
            self.card.with_card(|c| {
                c.run_until_idle();
                c.advance_time(5_000);
                c.run_until_idle();
            });
            let r = self.port.poll(self.run.queue, 64, (), Some(self.prog));
            if r.done == 0 && !r.tx_pending {
                return;
            }
        }
    }

    /// What left port 0, checked against `want` (by sequence number).
    fn egress(&self, want: impl Fn(u64) -> Vec<u8>, c: &mut XskCounts) -> Result<(), String> {
        for f in self.card.with_card(|card| card.take_egress(0)) {
            let seq = seq_of(&f).ok_or("a frame too short left the port")?;
            if f != want(seq) {
                return Err(format!("frame {seq} left the port changed"));
            }
            c.egress += 1;
        }
        Ok(())
    }

    /// The frame `seq` as the peer sends it.
    fn sent_frame(&self, seq: u64) -> Vec<u8> {
        frame(seq, self.run.len_of(seq))
    }

    /// The application reads its RX ring: each frame checked, then dropped (its chunk back to
    /// the fill ring) or, with `fwd`, sent back with the MACs swapped.
    fn read_rx(&self, fwd: bool, c: &mut XskCounts) -> Result<(), String> {
        let r = self.host.with_xsk(self.run.queue, |s| -> Result<(), String> {
            while let Some(d) = s.app_take_rx() {
                let f = s.frame(d).map_err(|e| e.to_string())?;
                let seq = seq_of(&f).ok_or("a short frame in the RX ring")?;
                if f != self.sent_frame(seq) {
                    return Err(format!("frame {seq} arrived changed"));
                }
                c.rx += 1;
                if fwd {
                    let off = d.addr % u64::from(s.chunk_size());
                    s.with_chunk(d.addr, |b| {
                        // CAST: below the chunk size.
                        let off = off as usize;
                        let macs = b.get_mut(off..off + 12).ok_or("a frame past its chunk")?;
                        let (dst, src) = macs.split_at_mut(6);
                        dst.swap_with_slice(src);
                        Ok::<(), &str>(())
                    })
                    .map_err(|e| e.to_string())??;
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

    fn run_rx(&mut self, fwd: bool) -> Result<XskCounts, String> {
        let mut c = XskCounts::default();
        let run = self.run;
        while c.sent < run.frames {
            let n = (run.frames - c.sent).min(run.batch as u64);
            for seq in c.sent..c.sent + n {
                let f = self.sent_frame(seq);
                self.card.with_card(|card| card.inject(0, &f));
            }
            c.sent += n;
            self.settle();
            self.read_rx(fwd, &mut c)?;
            self.settle();
            self.egress(|s| swapped(&frame(s, run.len_of(s))), &mut c)?;
        }
        self.settle();
        self.read_rx(fwd, &mut c)?;
        Ok(c)
    }

    fn run_tx(&mut self) -> Result<XskCounts, String> {
        let mut c = XskCounts::default();
        let run = self.run;
        while c.tx < run.frames {
            let n = (run.frames - c.tx).min(run.batch as u64);
            let put = self
                .host
                .with_xsk(run.queue, |s| {
                    let mut put = 0;
                    for seq in c.tx..c.tx + n {
                        if !s.app_send(&frame(seq, run.len_of(seq))) {
                            break;
                        }
                        put += 1;
                    }
                    put
                })
                .ok_or("no socket")?;
            c.tx += put;
            self.settle();
            self.egress(|s| frame(s, run.len_of(s)), &mut c)?;
            c.completed += self.host.with_xsk(run.queue, |s| s.app_reap()).unwrap_or(0) as u64;
            if put == 0 && c.completed == c.tx {
                return Err("the application could not send: no idle chunk".into());
            }
        }
        Ok(c)
    }

    /// Back to the page pool, the strict census, unbind, teardown.
    fn finish(mut self, mut counts: XskCounts) -> Result<XskReport, String> {
        let q = self.run.queue;
        self.settle();
        counts.completed += self.host.with_xsk(q, |s| s.app_reap()).unwrap_or(0) as u64;
        self.port
            .set_queue_source(q, SourceKind::Pages)
            .map_err(|e| format!("page source: {e}"))?;
        let census = self
            .host
            .with_xsk(q, |s| s.census_strict(None))
            .ok_or("no socket")?
            .map_err(|e| format!("census: {e}"))?;
        match self.host.xsk_overruns(q) {
            Some(0) => {}
            Some(n) => return Err(format!("{n} chunks were written past their end")),
            None => return Err("no socket".into()),
        }
        let stats = self.host.xsk_unbind(q).map_err(|e| format!("unbind: {e}"))?;
        self.port.remove();
        self.host.free_spare();
        Ok(XskReport {
            counts,
            census,
            stats,
        })
    }
}

/// Runs the scenario in `mode` on port 0 of the card that `card` and `access` reach (its wire
/// open); every byte and every count checked, an error says the first thing that went wrong.
/// The caller checks afterwards that the model has no page left.
pub fn run_xsk<C: CardAccess, A: ModelAccess>(
    card: C,
    access: A,
    run: &XskRun<'_>,
    mode: XskMode,
) -> Result<XskReport, String> {
    run.check()?;
    let mut rig = Rig::new(card, access, run)?;
    let counts = match mode {
        XskMode::Rxdrop => rig.run_rx(false)?,
        XskMode::L2fwd => rig.run_rx(true)?,
        XskMode::Txonly => rig.run_tx()?,
    };
    let report = rig.finish(counts)?;
    if !report.counts.agree(mode) {
        return Err(format!("xsk: counts do not agree: {:?}", report.counts));
    }
    Ok(report)
}
