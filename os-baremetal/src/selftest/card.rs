//! The card as a PCI device: QEMU's `onic-card` (`qemu-card/`, the model behind a PCI device),
//! found and driven the way a bare-metal OS drives a real board.
//!
//! 1. PCI configuration space is scanned through ports 0xCF8/0xCFC for the shell's functions
//!    (`onic_hal::pci`: Xilinx, PF0 and PF1 of a stock shell); their 64-bit BAR0 (QDMA) and BAR2
//!    (shell) are read as the firmware assigned them and sized, must lie below 4 GiB (the image
//!    identity-maps only that), and memory decoding and bus mastering are turned on (in the
//!    bridges above the card too).
//! 2. The same driver core as the other groups brings both functions up, over
//!    `onic_hal::mmio::Mmio` windows on the BARs and DMA memory whose bus addresses are the heap
//!    pages' physical addresses ([`crate::dmamem`]).
//! 3. Frames of many flows and sizes go from one PF's TX queues out of its CMAC port, over the
//!    card's cable to the other port, and up the other PF's RX queues, in both directions: every
//!    byte, the queue RSS chose, the TX completions and the CMAC, adapter and driver counters are
//!    checked.
//! 4. Teardown: every queue invalidated (the `Quiesced` proof the core takes before it gives a
//!    ring's pages back), both functions released, every region, page and mapping back, the
//!    functions' bus mastering off, the heap as before.
//!
//! No interrupts: the card's MSI-X capability stays disabled (so its messages stay pending in
//! the PBA) and the group polls the queue pairs, which is NAPI without the interrupt. The card's
//! own count of driver mistakes (model violations) goes to QEMU's log, which `cargo xtask qemu
//! --card pci` checks.
//!
//! Without the card (a stock QEMU) the group says it was skipped; built with feature `pci-card`
//! (`cargo xtask qemu --card pci`) it fails instead.

use alloc::vec::Vec;
use core::fmt;
use core::ptr::NonNull;

use onic_core::device::Rss;
use onic_core::queue::rx::RxFrame;
use onic_core::queue::tx::TxDone;
use onic_core::stats::HW_COUNTERS;
use onic_core::{
    BufSizeIdx, Device, DeviceConfig, PassAll, PassInfo, QueueError, QueueId, RingSizeIdx, RxContext, XdpRxq,
};
use onic_embed::done::FrameDone;
use onic_embed::frame::Frame;
use onic_embed::set::{PairSpec, QueueSet};
use onic_embed::sink::OsQueue;
use onic_hal::layout::ctxt::{CmptCtxt, CtxtSel};
use onic_hal::mmio::Mmio;
use onic_hal::{pci as ids, Direction, DmaPage};

use super::datapath::{os_frame, Steering, WAIT_NS};
use super::frames::{self, MAX_BUILD, SIZES};
use super::queues::{h2c_enabled, pair_as_programmed, read_context};
use super::traffic::counter;
use super::{Runner, QUEUES};
use crate::dmamem::IdentityDma;
use crate::pci::{self, BarError, Function, MemBar, CMD_BUS_MASTER, CMD_MEMORY};
use crate::time::{self, TscDelay};

/// Whether this run must find the card (feature `pci-card`, set by `cargo xtask qemu --card pci`).
const REQUIRED: bool = cfg!(feature = "pci-card");
/// Ring-size index of every ring (128 entries).
const RING: u8 = 2;
/// Buffer-size index of every RX queue (2048 bytes: every test frame fits one buffer).
const BUF: u8 = 4;
/// Flows per direction; each is sent in every size of [`SIZES`].
const FLOWS: u32 = 12;
/// Frames sent per xmit-more batch, spread over the sending PF's TX queues.
const ROUND: u32 = 32;
/// Completions one poll of a pair may consume.
const BUDGET: usize = 16;

/// The DMA memory the card's queues get.
type Dma<'m> = &'m IdentityDma;
/// A frame on a TX ring of the card.
type CardFrame<'m> = Frame<Dma<'m>>;
/// One brought-up function of the card.
type CardDevice<'b> = Device<Mmio<'b>, Mmio<'b>>;
/// The queue pairs of one function.
type CardSet<'m> = QueueSet<'m, Dma<'m>, CardFrame<'m>>;

/// Why the card could not be used, or why traffic stopped.
#[derive(Clone, Copy, Debug)]
enum CardError {
    /// No function with PF `pf`'s device ID answered.
    Missing(u8),
    /// PF `pf` is not PCI function `pf` (the QDMA function id is the PCI function number).
    Function { pf: u8, func: Function },
    /// PF `pf` does not carry the shell's class code.
    Class { pf: u8, class: u32 },
    /// A BAR of PF `pf` is not a usable 64-bit memory BAR.
    Bar { pf: u8, error: BarError },
    /// A BAR of PF `pf` ends above 4 GiB, outside the image's identity map.
    Above4G { pf: u8, bar: u8, at: MemBar },
    /// A BAR of PF `pf` is smaller than what the driver maps.
    Small { pf: u8, bar: u8, len: u64, need: u64 },
    /// PF `pf` does not keep memory decoding and bus mastering on.
    NotEnabled { pf: u8, command: u16 },
    /// No page for an OS TX buffer.
    NoPage,
    /// The TX queue refused a frame.
    Refused,
    /// A queue went into its error state.
    Queue(QueueError),
    /// Frames did not arrive, or TX buffers did not come back, in time.
    Timeout { outstanding: usize, in_flight: u16 },
}

impl fmt::Display for CardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing(pf) => write!(
                f,
                "no function {:04x}:{:04x} (PF{pf}) on any bus",
                ids::VENDOR_XILINX,
                pf_id(*pf)
            ),
            Self::Function { pf, func } => write!(f, "PF{pf} is at {func}, not PCI function {pf}"),
            Self::Class { pf, class } => write!(f, "PF{pf} has class code {class:06x}"),
            Self::Bar { pf, error } => write!(f, "PF{pf}: {error}"),
            Self::Above4G { pf, bar, at } => write!(f, "PF{pf} BAR{bar} at {:#x} ends above 4 GiB", at.base),
            Self::Small { pf, bar, len, need } => {
                write!(f, "PF{pf} BAR{bar} is {len:#x} bytes, the driver maps {need:#x}")
            }
            Self::NotEnabled { pf, command } => write!(f, "PF{pf} command register reads {command:#06x}"),
            Self::NoPage => f.write_str("no page for a TX buffer"),
            Self::Refused => f.write_str("a TX queue refused a frame"),
            Self::Queue(e) => write!(f, "a queue failed: {e}"),
            Self::Timeout {
                outstanding,
                in_flight,
            } => {
                write!(
                    f,
                    "{outstanding} frame(s) did not arrive, {in_flight} TX buffer(s) not back in time"
                )
            }
        }
    }
}

/// The stock shell's device ID of PF `pf`.
fn pf_id(pf: u8) -> u16 {
    ids::STOCK_PF_IDS.get(usize::from(pf)).copied().unwrap_or(0)
}

/// One PF as the firmware left it, its BARs checked.
struct Pf {
    func: Function,
    qdma: MemBar,
    shell: MemBar,
}

impl Pf {
    /// The function's QDMA and shell BARs as register windows (the whole QDMA BAR, the shell's
    /// window the driver maps), valid while `self` is borrowed.
    fn windows(&self) -> (Mmio<'_>, Mmio<'_>) {
        let window = |bar: &MemBar, len: u64| {
            // CAST: the BAR lies below 4 GiB (checked in `map_bars`), so address and length fit.
            let base = NonNull::new(bar.base as usize as *mut u8).unwrap_or(NonNull::dangling());
            // SAFETY: `bar` is a memory BAR of this function that the firmware assigned and
            // `map_bars` checked: at least `len` bytes, below 4 GiB, where the boot code maps
            // virtual = physical (the PCI hole is uncached by the firmware's MTRRs); memory
            // decoding stays on until `release`, which takes `self` by value, so after every
            // window borrowed from `self` is gone. The card reaches only DMA memory the driver
            // hands it: it is told nothing but addresses from `IdentityDma`.
            unsafe { Mmio::new(base, len as usize) }
        };
        (
            window(&self.qdma, self.qdma.len),
            window(&self.shell, ids::SHELL_BAR_LEN),
        )
    }

    /// Turns memory decoding and bus mastering off again; returns the command register.
    fn release(self) -> u16 {
        self.func.disable()
    }
}

/// Runs the group.
pub fn run(r: &mut Runner) {
    r.group(
        "the card as a PCI device (onic-card: config space, BARs, MMIO, DMA at physical addresses, polled)",
    );
    let heap_before = crate::heap::stats().in_use;
    let Some(funcs) = scan(r) else {
        return;
    };
    let Some(pfs) = map_bars(r, funcs) else {
        return;
    };
    {
        let dma = IdentityDma::new();
        if let Some((devs, rss)) = bring_up(r, &pfs) {
            drive(r, devs, &rss, &dma);
        }
        let s = dma.stats();
        r.check(
            "card-dma-accounting",
            s.live_regions == 0 && s.live_pages == 0 && s.mapped_pages == 0,
            format_args!(
                "{} regions and {} pages allocated at their physical addresses; {} regions, {} pages, {} mappings left",
                s.regions_allocated, s.pages_allocated, s.live_regions, s.live_pages, s.mapped_pages
            ),
        );
    }
    let commands = pfs.map(Pf::release);
    r.check(
        "card-pci-release",
        commands.iter().all(|c| c & (CMD_MEMORY | CMD_BUS_MASTER) == 0),
        format_args!(
            "memory decoding and bus mastering off again (command {:#06x}, {:#06x})",
            commands[0], commands[1]
        ),
    );
    let heap = crate::heap::stats().in_use;
    r.check(
        "card-heap-balance",
        heap == heap_before,
        format_args!("{heap} bytes in use after the group ({heap_before} before)"),
    );
}

/// Finds PF0 and PF1 by their IDs; reports the card missing (a failure only when it is required).
fn scan(r: &mut Runner) -> Option<[Function; 2]> {
    let mut found: [Option<Function>; 2] = [None, None];
    pci::for_each_function(|f, vendor, device| {
        if vendor != ids::VENDOR_XILINX {
            return;
        }
        if let Some(slot) = ids::STOCK_PF_IDS.iter().position(|&d| d == device) {
            found[slot].get_or_insert(f);
        }
    });
    if found == [None, None] && !REQUIRED {
        r.note(format_args!(
            "skipped: no OpenNIC card on the PCI bus (stock QEMU); `cargo xtask qemu --card pci` boots the image with QEMU's onic-card"
        ));
        return None;
    }
    let check = |pf: u8| {
        let func = found[usize::from(pf)].ok_or(CardError::Missing(pf))?;
        if func.func != pf {
            return Err(CardError::Function { pf, func });
        }
        let class = func.class_code();
        if class >> 8 != u32::from(ids::CLASS_NETWORK_OTHER) {
            return Err(CardError::Class { pf, class });
        }
        Ok(func)
    };
    match (check(0), check(1)) {
        (Ok(pf0), Ok(pf1)) => {
            r.check(
                "pci-scan",
                true,
                format_args!(
                    "PF0 {:04x}:{:04x} at {pf0}, PF1 {:04x}:{:04x} at {pf1}, class {:04x} (network, other)",
                    ids::VENDOR_XILINX,
                    pf_id(0),
                    ids::VENDOR_XILINX,
                    pf_id(1),
                    ids::CLASS_NETWORK_OTHER
                ),
            );
            Some([pf0, pf1])
        }
        (Err(e), _) | (_, Err(e)) => {
            r.check("pci-scan", false, format_args!("{e}"));
            None
        }
    }
}

/// One PF's BARs: both 64-bit memory BARs, below 4 GiB, as large as the driver maps them.
fn pf_bars(pf: u8, func: Function) -> Result<Pf, CardError> {
    let bar = |index: u8, need: u64| {
        let at = func
            .mem_bar64(index)
            .map_err(|error| CardError::Bar { pf, error })?;
        if !at.below_4g() {
            return Err(CardError::Above4G { pf, bar: index, at });
        }
        if at.len < need {
            return Err(CardError::Small {
                pf,
                bar: index,
                len: at.len,
                need,
            });
        }
        Ok(at)
    };
    Ok(Pf {
        func,
        qdma: bar(ids::QDMA_BAR, ids::qdma_bar_len(QUEUES))?,
        shell: bar(ids::SHELL_BAR, ids::SHELL_BAR_LEN)?,
    })
}

/// Reads both PFs' BARs and turns on memory decoding and bus mastering (in the bridges above
/// the card too).
fn map_bars(r: &mut Runner, funcs: [Function; 2]) -> Option<[Pf; 2]> {
    let bars = pf_bars(0, funcs[0]).and_then(|a| Ok([a, pf_bars(1, funcs[1])?]));
    let pfs = match bars {
        Ok(pfs) => pfs,
        Err(e) => {
            r.check("pci-bars", false, format_args!("{e}"));
            return None;
        }
    };
    for (i, p) in pfs.iter().enumerate() {
        crate::println!(
            "    PF{i} {}: BAR{} (QDMA) {:#x}, {} KiB; BAR{} (shell) {:#x}, {} KiB",
            p.func,
            ids::QDMA_BAR,
            p.qdma.base,
            p.qdma.len / 1024,
            ids::SHELL_BAR,
            p.shell.base,
            p.shell.len / 1024
        );
    }
    r.check(
        "pci-bars",
        true,
        format_args!(
            "BAR{} and BAR{} of both PFs: 64-bit memory BARs the firmware assigned below 4 GiB, sized",
            ids::QDMA_BAR,
            ids::SHELL_BAR
        ),
    );
    let (bridges, bridges_on) = pci::enable_bridges_to(funcs[0].bus);
    let want = CMD_MEMORY | CMD_BUS_MASTER;
    let enabled = (0..2u8).try_for_each(|pf| {
        let command = pfs[usize::from(pf)].func.enable();
        if command & want == want {
            Ok(())
        } else {
            Err(CardError::NotEnabled { pf, command })
        }
    });
    let ok = enabled.is_ok() && bridges_on;
    match enabled {
        Ok(()) => r.check(
            "pci-enable",
            ok,
            format_args!(
                "memory decoding and bus mastering on in both PFs and the {bridges} bridge(s) above them"
            ),
        ),
        Err(e) => r.check("pci-enable", false, format_args!("{e}")),
    };
    if ok {
        Some(pfs)
    } else {
        let _ = pfs.map(Pf::release);
        None
    }
}

/// Brings up PF0, then PF1, with the driver core over the BAR windows; checks the link.
/// Returns the devices and their RSS states.
fn bring_up<'b>(r: &mut Runner, pfs: &'b [Pf; 2]) -> Option<([CardDevice<'b>; 2], [Rss; 2])> {
    let mut devs: [Option<(CardDevice<'b>, Rss)>; 2] = [None, None];
    for (pf, p) in pfs.iter().enumerate() {
        let name = if pf == 0 { "card-init-pf0" } else { "card-init-pf1" };
        let (qdma, shell) = p.windows();
        // CAST: pf < 2.
        let result = DeviceConfig::new(pf as u8, QUEUES)
            .map_err(onic_core::Error::from)
            .and_then(|cfg| Device::init(qdma, shell, &mut TscDelay, cfg));
        match result {
            Ok((dev, rss)) => {
                let cmacs = dev.cmacs();
                r.check(
                    name,
                    cmacs == 2,
                    format_args!("Device::init over the BARs: {QUEUES} queue pairs, {cmacs} CMAC(s) found (2 expected)"),
                );
                devs[pf] = Some((dev, rss));
            }
            Err(e) => {
                r.check(name, false, format_args!("Device::init failed: {e}"));
            }
        }
    }
    match devs {
        [Some((d0, rss0)), Some((d1, rss1))] => {
            let up = [d0.link_up(), d1.link_up()];
            r.check(
                "card-link-up",
                up == [true, true],
                format_args!(
                    "STAT_RX_STATUS over MMIO: port 0 up {}, port 1 up {}",
                    up[0], up[1]
                ),
            );
            Some(([d0, d1], [rss0, rss1]))
        }
        [d0, d1] => {
            for (dev, _) in [d1, d0].into_iter().flatten() {
                let _ = dev.teardown(&mut TscDelay);
            }
            None
        }
    }
}

/// The queue pairs of both functions, traffic in both directions, teardown.
fn drive<'m>(r: &mut Runner, devs: [CardDevice<'_>; 2], rss: &[Rss; 2], dma: Dma<'m>) {
    let specs = specs();
    let Some(mut sets) = start_pairs(r, &devs, dma, &specs) else {
        teardown_devices(r, devs);
        return;
    };
    for from in 0..2 {
        wire(r, &devs, rss, &mut sets, dma, from);
    }
    teardown(r, &devs, sets, dma);
    teardown_devices(r, devs);
}

/// Pair `q`'s configuration: 128-entry rings, 2048-byte RX buffers, a pool mapping from-device.
fn specs() -> Vec<PairSpec> {
    let (Ok(ring), Ok(buf)) = (RingSizeIdx::new(RING), BufSizeIdx::new(BUF)) else {
        return Vec::new();
    };
    (0..QUEUES)
        .map(|q| PairSpec::new(QueueId::new(q), ring, buf, Direction::FromDevice))
        .collect()
}

/// Builds and starts every pair of both functions; checks their contexts read back over MMIO.
fn start_pairs<'m>(
    r: &mut Runner,
    devs: &[CardDevice<'_>; 2],
    dma: Dma<'m>,
    specs: &[PairSpec],
) -> Option<[CardSet<'m>; 2]> {
    let mut sets: Vec<CardSet<'m>> = Vec::new();
    let mut failure = None;
    for dev in devs {
        let started = CardSet::build(&dma, specs, &[]).and_then(|mut set| {
            let result = set.start(dev, &mut TscDelay);
            sets.push(set);
            result
        });
        if let Err(e) = started {
            failure.get_or_insert(e);
        }
    }
    let programmed = sets
        .iter()
        .zip(devs)
        .flat_map(|(set, dev)| {
            set.pairs
                .iter()
                .zip(specs)
                .map(move |(p, s)| pair_as_programmed(dev, p, s))
        })
        .filter(|&ok| ok)
        .count();
    let want = 2 * specs.len();
    match failure {
        None => r.check(
            "card-pairs",
            programmed == want && want == 2 * usize::from(QUEUES),
            format_args!(
                "{programmed}/{want} QueuePairs started; contexts read back over MMIO as programmed, RX rings full, page census exact"
            ),
        ),
        Some(e) => r.check("card-pairs", false, format_args!("a queue pair did not start: {e}")),
    };
    match (failure, <[CardSet<'m>; 2]>::try_from(sets)) {
        (None, Ok(sets)) if programmed == want => Some(sets),
        (_, Ok(sets)) => {
            teardown_sets(devs, sets, dma);
            None
        }
        (_, Err(sets)) => {
            let pairs = devs.iter().zip(sets).collect();
            let _ = QueueSet::teardown_all(pairs, &mut TscDelay, &mut FrameDone::new(&[], dma));
            None
        }
    }
}

/// Tears every pair of both functions down (TX first); whether all went down cleanly.
fn teardown_sets<'m>(devs: &[CardDevice<'_>; 2], sets: [CardSet<'m>; 2], dma: Dma<'m>) -> bool {
    let pairs = devs.iter().zip(sets).collect();
    let mut done = FrameDone::new(&[], dma);
    QueueSet::teardown_all(pairs, &mut TscDelay, &mut done).is_ok()
}

/// What one frame sent should look like when it arrives.
#[derive(Clone, Copy, Debug)]
struct Expect {
    flow: u32,
    len: u16,
    /// The RX queue RSS sends it to.
    queue: u16,
    seen: bool,
}

/// What the receiving function saw of one direction's frames.
struct Tally {
    /// The function that should receive them.
    to: u8,
    expect: Vec<Expect>,
    received: u32,
    bytes: u64,
    misrouted: u32,
    corrupt: u32,
    /// Frames not sent in this direction, seen twice, or on the wrong function.
    stray: u32,
}

impl Tally {
    fn new(to: u8) -> Self {
        Self {
            to,
            expect: Vec::new(),
            received: 0,
            bytes: 0,
            misrouted: 0,
            corrupt: 0,
            stray: 0,
        }
    }

    /// Frame `id` of the direction: flow `id / SIZES.len()` in size `id % SIZES.len()`.
    fn build(id: u32, buf: &mut [u8; MAX_BUILD]) -> &[u8] {
        // CAST: SIZES has 22 entries.
        let n = SIZES.len() as u32;
        frames::build(&frames::flow(id / n), SIZES[(id % n) as usize], id, buf)
    }

    fn outstanding(&self) -> usize {
        self.expect.iter().filter(|x| !x.seen).count()
    }

    /// The receive side: frame `data` arrived on queue `queue` of `func`.
    fn on_frame(&mut self, func: u8, queue: u16, data: &[u8]) {
        let Some(id) = frames::id_of(data) else {
            self.stray += 1;
            return;
        };
        let Some(x) = self.expect.get_mut(id as usize) else {
            self.stray += 1;
            return;
        };
        if x.seen || func != self.to {
            self.stray += 1;
            return;
        }
        x.seen = true;
        let x = *x;
        let mut buf = [0u8; MAX_BUILD];
        let want = frames::build(&frames::flow(x.flow), usize::from(x.len), id, &mut buf);
        if want != data {
            self.corrupt += 1;
        }
        if x.queue != queue {
            self.misrouted += 1;
        }
        self.received += 1;
        self.bytes += data.len() as u64;
    }
}

/// What the pollers did, beyond the tally.
#[derive(Clone, Copy, Debug, Default)]
struct Polled {
    /// OS frames back through `TxDone`.
    tx_done: u64,
    /// Polls made.
    polls: u64,
    /// The first queue error a poll reported.
    error: Option<QueueError>,
}

/// One poll of every pair of both functions, NAPI without the interrupt: the pair's TX queue
/// reclaimed, up to [`BUDGET`] frames shown to the tally and kept by the "OS", which gives
/// each page straight back to the pair's pool.
fn poll_all<'m>(
    devs: &[CardDevice<'_>; 2],
    sets: &mut [CardSet<'m>; 2],
    dma: Dma<'m>,
    tally: &mut Tally,
    out: &mut Polled,
) {
    let mut held: Vec<((), DmaPage)> = Vec::new();
    for (f, (dev, set)) in devs.iter().zip(sets.iter_mut()).enumerate() {
        let db = dev.doorbells();
        for (q, pair) in set.pairs.iter_mut().enumerate() {
            // CAST: f < 2, q < QUEUES.
            let (func, queue) = (f as u8, q as u16);
            let mut done = FrameDone::new(&[], dma);
            let poll = {
                let mut sink = OsQueue::observed(&mut held, (), |fr: &RxFrame<DmaPage>, _: PassInfo| {
                    tally.on_frame(func, queue, fr.data())
                });
                let mut ctx = RxContext {
                    sink: &mut sink,
                    rxq: XdpRxq {
                        queue_index: queue,
                        port: func,
                    },
                    dispatch: PassAll,
                };
                pair.poll(BUDGET, &db, &mut ctx, &mut done)
            };
            for ((), page) in held.drain(..) {
                // The OS only read the frame: nothing of the page is dirty.
                pair.pool.return_from_os(page, 0);
            }
            out.polls += 1;
            out.tx_done += done.counts.os_done;
            if let Some(e) = poll.rx.error {
                out.error.get_or_insert(e);
            }
        }
    }
}

/// Queues frames `ids` of the direction on the sending function's TX queues (frame `id` on queue
/// `id % QUEUES`, one xmit-more batch per queue), each recorded in the tally with the RX queue
/// `steer` gives it, then rings each queue's doorbell once.
fn send_round<'m>(
    dev: &CardDevice<'_>,
    set: &mut CardSet<'m>,
    dma: Dma<'m>,
    tally: &mut Tally,
    steer: &Steering,
    ids: core::ops::Range<u32>,
) -> Result<(), CardError> {
    let db = dev.doorbells();
    let mut result = Ok(());
    for id in ids {
        let mut buf = [0u8; MAX_BUILD];
        let frame = Tally::build(id, &mut buf);
        // CAST: SIZES has 22 entries; frames are at most MAX_BUILD bytes.
        let n = SIZES.len() as u32;
        tally.expect.push(Expect {
            flow: id / n,
            len: frame.len() as u16,
            queue: steer.queue(frame),
            seen: false,
        });
        let Some(os) = os_frame(dma, frame) else {
            result = Err(CardError::NoPage);
            break;
        };
        let q = id as usize % set.pairs.len().max(1);
        if let Err(e) = set.pairs[q].tx.xmit_os(&db, os, true) {
            FrameDone::new(&[], dma).os_done(e.into_inner());
            result = Err(CardError::Refused);
            break;
        }
    }
    for pair in &mut set.pairs {
        pair.tx.flush(&db);
    }
    result
}

/// Polls until every frame of the tally arrived and the sending function's TX buffers are
/// back, or [`WAIT_NS`] passes.
fn settle<'m>(
    devs: &[CardDevice<'_>; 2],
    sets: &mut [CardSet<'m>; 2],
    dma: Dma<'m>,
    tally: &mut Tally,
    from: usize,
    out: &mut Polled,
) -> Result<(), CardError> {
    let deadline = time::nanos_since_boot() + WAIT_NS;
    loop {
        poll_all(devs, sets, dma, tally, out);
        if let Some(e) = out.error {
            return Err(CardError::Queue(e));
        }
        let in_flight: u16 = sets[from].pairs.iter().map(|p| p.tx.in_flight()).sum();
        let outstanding = tally.outstanding();
        if outstanding == 0 && in_flight == 0 {
            return Ok(());
        }
        if time::nanos_since_boot() > deadline {
            return Err(CardError::Timeout {
                outstanding,
                in_flight,
            });
        }
    }
}

/// The counters one direction moves: each port's CMAC and adapter counters, and the driver's
/// packets and bytes per function (RX, TX).
struct Snapshot {
    hw: [[u64; HW_COUNTERS]; 2],
    rx: [(u64, u64); 2],
    tx: [(u64, u64); 2],
}

impl Snapshot {
    fn take(devs: &[CardDevice<'_>; 2], sets: &[CardSet<'_>; 2]) -> Self {
        let sum = |set: &CardSet<'_>, rx: bool| {
            set.pairs.iter().fold((0, 0), |(p, b), pair| {
                let (dp, db) = if rx {
                    (pair.rx.stats().rx_packets, pair.rx.stats().rx_bytes)
                } else {
                    (pair.tx.stats().tx_packets, pair.tx.stats().tx_bytes)
                };
                (p + dp, b + db)
            })
        };
        Self {
            hw: [devs[0].hw_counters(), devs[1].hw_counters()],
            rx: [sum(&sets[0], true), sum(&sets[1], true)],
            tx: [sum(&sets[0], false), sum(&sets[1], false)],
        }
    }
}

/// One direction: frames of [`FLOWS`] flows in every size of [`SIZES`] from the TX queues of
/// PF `from`, out of its port, over the cable, up the other PF's RX queues.
fn wire<'m>(
    r: &mut Runner,
    devs: &[CardDevice<'_>; 2],
    rss: &[Rss; 2],
    sets: &mut [CardSet<'m>; 2],
    dma: Dma<'m>,
    from: usize,
) {
    let to = 1 - from;
    let mut steer = Steering::initial();
    steer.refresh(&rss[to]);
    // CAST: to < 2; SIZES has 22 entries.
    let mut tally = Tally::new(to as u8);
    let total = FLOWS * SIZES.len() as u32;
    let before = Snapshot::take(devs, sets);
    let mut polled = Polled::default();
    let start = time::nanos_since_boot();
    let mut result = Ok(());
    let mut next = 0;
    while next < total && result.is_ok() {
        let end = (next + ROUND).min(total);
        result = send_round(&devs[from], &mut sets[from], dma, &mut tally, &steer, next..end)
            .and_then(|()| settle(devs, sets, dma, &mut tally, from, &mut polled));
        next = end;
    }
    let us = (time::nanos_since_boot() - start) / 1000;
    let after = Snapshot::take(devs, sets);
    let sent = tally.expect.len() as u64;
    let name = if from == 0 {
        "card-wire-pf0-to-pf1"
    } else {
        "card-wire-pf1-to-pf0"
    };
    let clean = tally.corrupt == 0 && tally.misrouted == 0 && tally.stray == 0;
    let ok = result.is_ok() && u64::from(tally.received) == sent && sent == u64::from(total) && clean;
    let why = result.err();
    r.check(
        name,
        ok && polled.tx_done == sent,
        format_args!(
            "{}/{sent} frames ({} bytes, {FLOWS} flows x {} sizes) from PF{from}'s TX queues came up PF{to}'s RX queues \
             in {us} us: {} corrupt, {} on another queue than RSS chose, {} stray; {} TX buffers back through TxDone; \
             {} polls{}{}",
            tally.received,
            tally.bytes,
            SIZES.len(),
            tally.corrupt,
            tally.misrouted,
            tally.stray,
            polled.tx_done,
            polled.polls,
            if why.is_some() { "; stopped: " } else { "" },
            Because(why)
        ),
    );
    counters(r, &before, &after, from, sent, tally.bytes);
}

/// Shows an optional error (nothing for `None`).
struct Because(Option<CardError>);

impl fmt::Display for Because {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(e) => write!(f, "{e}"),
            None => Ok(()),
        }
    }
}

/// The CMAC, adapter and driver counters of one direction agree with what was sent.
fn counters(r: &mut Runner, before: &Snapshot, after: &Snapshot, from: usize, sent: u64, bytes: u64) {
    let to = 1 - from;
    let hw = |port: usize, name: &str| {
        counter(&after.hw[port], name).wrapping_sub(counter(&before.hw[port], name))
    };
    let wire_bytes = bytes + sent * onic_sim::FCS_LEN as u64;
    let driver_tx = (
        after.tx[from].0 - before.tx[from].0,
        after.tx[from].1 - before.tx[from].1,
    );
    let driver_rx = (after.rx[to].0 - before.rx[to].0, after.rx[to].1 - before.rx[to].1);
    let ok = hw(from, "stat_tx_total_good_pkts") == sent
        && hw(from, "stat_adapt_tx_sent") == sent
        && hw(from, "stat_tx_total_good_bytes") == wire_bytes
        && hw(to, "stat_rx_total_good_pkts") == sent
        && hw(to, "stat_adapt_rx_recv") == sent
        && hw(to, "stat_adapt_rx_drop") == 0
        && hw(to, "stat_rx_total_good_bytes") == wire_bytes
        && driver_tx == (sent, bytes)
        && driver_rx == (sent, bytes);
    let name = if from == 0 {
        "card-counters-pf0-to-pf1"
    } else {
        "card-counters-pf1-to-pf0"
    };
    r.check(
        name,
        ok,
        format_args!(
            "port {from} CMAC tx {} frames {} bytes, adapter sent {}; port {to} CMAC rx {} frames {} bytes, adapter \
             recv {} drop {}; driver PF{from} tx {}/{} B, PF{to} rx {}/{} B; sent {sent} frames, {bytes} B",
            hw(from, "stat_tx_total_good_pkts"),
            hw(from, "stat_tx_total_good_bytes"),
            hw(from, "stat_adapt_tx_sent"),
            hw(to, "stat_rx_total_good_pkts"),
            hw(to, "stat_rx_total_good_bytes"),
            hw(to, "stat_adapt_rx_recv"),
            hw(to, "stat_adapt_rx_drop"),
            driver_tx.0,
            driver_tx.1,
            driver_rx.0,
            driver_rx.1
        ),
    );
}

/// The page census, then every pair torn down through the core (each queue invalidated: the
/// `Quiesced` proof), its contexts read back invalid.
fn teardown<'m>(r: &mut Runner, devs: &[CardDevice<'_>; 2], sets: [CardSet<'m>; 2], dma: Dma<'m>) {
    let census_ok = sets.iter().all(|s| {
        let c = s.page_counts();
        c.total() == s.live_pool_pages() && c.with_os == 0 && c.in_tx_flight == 0
    });
    let pool_pages: u64 = sets.iter().map(CardSet::live_pool_pages).sum();
    let live = dma.stats().live_pages;
    r.check(
        "card-page-census",
        census_ok && live == pool_pages,
        format_args!(
            "every pool's pages are in its cache or its RX ring ({pool_pages} pages), none with the OS or in flight; \
             the DMA memory has {live} pages out"
        ),
    );
    let down = teardown_sets(devs, sets, dma);
    let invalid = devs
        .iter()
        .flat_map(|dev| (0..QUEUES).map(move |q| (dev, q)))
        .filter(|&(dev, q)| {
            dev.function().abs_queue(QueueId::new(q)).is_some_and(|abs| {
                !h2c_enabled(dev, abs)
                    && read_context(dev, CtxtSel::Cmpt, abs, CmptCtxt::from_words).is_some_and(|c| !c.valid())
            })
        })
        .count();
    let left = dma.stats();
    r.check(
        "card-pairs-teardown",
        down && invalid == 2 * usize::from(QUEUES) && left.live_pages == 0 && left.live_regions == 0,
        format_args!(
            "{invalid}/{} queues invalidated over MMIO (contexts read back disabled), every page back to its pool and \
             from there to the DMA memory ({} pages, {} rings left)",
            2 * QUEUES,
            left.live_pages,
            left.live_regions
        ),
    );
}

/// PF1, then the master PF0, released by the core.
fn teardown_devices(r: &mut Runner, devs: [CardDevice<'_>; 2]) {
    let [d0, d1] = devs;
    let down = [d1, d0]
        .into_iter()
        .map(|dev| dev.teardown(&mut TscDelay).0.is_ok())
        .filter(|&ok| ok)
        .count();
    r.check(
        "card-device-teardown",
        down == 2,
        format_args!(
            "{down}/2 functions torn down (PF1, then the master PF0): QCONF and FMAP cleared over MMIO"
        ),
    );
}
