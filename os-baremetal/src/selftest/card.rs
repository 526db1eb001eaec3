//! The card as a PCI device: QEMU's `onic-card` (`qemu-card/`, the model behind a PCI device),
//! found and driven the way a bare-metal OS drives a real board.
//!
//! 1. PCI configuration space is scanned through ports 0xCF8/0xCFC for the shell's functions
//!    (`onic_hal::pci`: Xilinx, PF0 and PF1 of a stock shell); their 64-bit BAR0 (QDMA) and BAR2
//!    (shell) are read as the firmware assigned them and sized, must lie below 4 GiB (the image
//!    identity-maps only that), and memory decoding and bus mastering are turned on (in the
//!    bridges above the card too).
//! 2. Both functions come up as `onic_embed` ports (`SoloPort`, the door every host uses), over
//!    a model host whose register windows are `onic_hal::mmio::Mmio` windows on the BARs
//!    ([`PciCard`]) and whose DMA memory gives the device the heap pages' physical addresses
//!    ([`crate::dmamem`]).
//! 3. Frames of many flows and sizes go from one port's stack TX rings out of its CMAC, over the
//!    card's cable to the other port, and up the other port's RX queues to its stack, in both
//!    directions: every byte, the queue RSS chose, the TX completions and the CMAC, adapter and
//!    driver counters are checked.
//! 4. Teardown: the page census, every queue stopped (its contexts read back invalid), both
//!    functions released, every region, page and mapping back, the functions' bus mastering
//!    off, the heap as before.
//!
//! No interrupts: the card's MSI-X capability stays disabled (so its messages stay pending in
//! the PBA) and the group polls every queue index, which is NAPI without the interrupt. The
//! card's own count of driver mistakes (model violations) goes to QEMU's log, which `cargo xtask
//! qemu --card pci` checks.
//!
//! Without the card (a stock QEMU) the group says it was skipped; built with feature `pci-card`
//! (`cargo xtask qemu --card pci`) it fails instead.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::ptr::NonNull;

use onic_core::queue::pair::PairPoll;
use onic_core::stats::HW_COUNTERS;
use onic_core::xdp::{XdpAction, XdpBuff};
use onic_core::{BufSizeIdx, DeviceConfig, QueueError, RingSizeIdx};
use onic_embed::model::{ModelAccess, ModelHost};
use onic_embed::port::{
    PortConfig, PortError, QueueTuning, RxBufSizes, SoloPort, TxClean, TxLock, TxRole, XmitResult,
};
use onic_hal::layout::ctxt::SwCtxt;
use onic_hal::mmio::Mmio;
use onic_hal::pci as ids;

use super::datapath::{Steering, WAIT_NS};
use super::frames::{self, MAX_BUILD, SIZES};
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
/// Frames sent per xmit-more batch, spread over the sending port's TX rings.
const ROUND: u32 = 32;
/// Completions one poll of a queue index may consume.
const BUDGET: u32 = 16;

/// The programs a card port could run (the group attaches none).
type Prog = fn(&mut XdpBuff<'_>) -> XdpAction;
/// The host of one function of the card.
type CardHost<'b> = ModelHost<Prog, PciCard<'b>>;
/// One function of the card, driven through the door.
type CardPort<'b> = SoloPort<CardHost<'b>>;

/// How a port's host reaches the PCI card: the BARs of both functions as MMIO windows, the shell
/// through function `pf`'s own BAR2, DMA at physical addresses, the TSC's delay.
#[derive(Clone, Copy)]
struct PciCard<'b> {
    pfs: &'b [Pf; 2],
    pf: u8,
    dma: &'b IdentityDma,
}

impl<'b> ModelAccess for PciCard<'b> {
    type Qdma = Mmio<'b>;
    type Shell = Mmio<'b>;
    type Dma = &'b IdentityDma;
    type Delay = TscDelay;

    fn qdma(&self, func: u8) -> Mmio<'b> {
        let pfs: &'b [Pf; 2] = self.pfs;
        pfs[usize::from(func) % 2].windows().0
    }

    fn shell(&self) -> Mmio<'b> {
        let pfs: &'b [Pf; 2] = self.pfs;
        pfs[usize::from(self.pf) % 2].windows().1
    }

    fn dma(&self) -> &'b IdentityDma {
        self.dma
    }

    fn delay(&self) -> TscDelay {
        TscDelay
    }
}

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
    /// No page for a packet of the stack.
    NoPage,
    /// A TX ring refused a packet.
    Refused,
    /// An RX queue went into its error state.
    Queue(QueueError),
    /// A stack TX ring went into its error state.
    TxRing,
    /// Frames did not arrive, or TX buffers did not come back, in time.
    Timeout { outstanding: usize, in_flight: u32 },
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
            Self::NoPage => f.write_str("no page for a packet"),
            Self::Refused => f.write_str("a TX ring refused a packet"),
            Self::Queue(e) => write!(f, "a queue failed: {e}"),
            Self::TxRing => f.write_str("a stack TX ring went into its error state"),
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
/// Runs the group.
pub fn run(r: &mut Runner) {
    r.group(
        "the card as a PCI device (onic-card: config space, BARs, MMIO, DMA at physical addresses, ports, polled)",
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
        if let Some(card) = bring_up(r, &pfs, &dma) {
            drive(r, card, &dma);
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
        qdma: bar(
            ids::QDMA_BAR,
            ids::qdma_bar_len(TxRole::Xmit.qid(QUEUES, QUEUES - 1).get() + 1),
        )?,
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

/// Both functions of the card as ports, each with its host (the stack the test reads).
struct Card<'b> {
    hosts: [CardHost<'b>; 2],
    ports: [CardPort<'b>; 2],
}

/// The configuration of port `pf`: [`QUEUES`] queue indices with rings of [`RING`].
fn port_config(pf: u8) -> Result<PortConfig, PortError> {
    let ring = RingSizeIdx::new(RING).map_err(|_| PortError::Invalid)?;
    let dev = DeviceConfig::new(pf, QUEUES).map_err(|_| PortError::Invalid)?;
    Ok(PortConfig {
        func: pf,
        max_queues: QUEUES,
        queues: QUEUES,
        tx_ring: ring,
        rx_ring: ring,
        rs_fec: dev.rs_fec,
    })
}

/// Brings up PF0, then PF1, as ports over the BAR windows (the core's `Device::init` inside
/// `Port::new`); checks the link. Their RX pools serve buffers of [`BUF`].
fn bring_up<'b>(r: &mut Runner, pfs: &'b [Pf; 2], dma: &'b IdentityDma) -> Option<Card<'b>> {
    let buf = BufSizeIdx::new(BUF).ok()?;
    let mut made: [Option<(CardHost<'b>, CardPort<'b>)>; 2] = [None, None];
    for pf in 0..2u8 {
        let name = if pf == 0 { "card-init-pf0" } else { "card-init-pf1" };
        let host = ModelHost::new(PciCard { pfs, pf, dma }).for_port(pf);
        host.set_pool_config(None, RxBufSizes::all(buf));
        let port =
            port_config(pf).and_then(|cfg| SoloPort::new(host.regs(pf), host.delay(), host.clone(), cfg));
        match port {
            Ok(port) => {
                let cmacs = port.port().cmacs();
                r.check(
                    name,
                    cmacs == 2,
                    format_args!(
                        "Port::new (Device::init) over the BARs: {QUEUES} queue indices, {cmacs} CMAC(s) found (2 expected)"
                    ),
                );
                made[usize::from(pf)] = Some((host, port));
            }
            Err(e) => {
                r.check(name, false, format_args!("Port::new failed: {e}"));
            }
        }
    }
    match made {
        [Some((h0, p0)), Some((h1, p1))] => {
            let up = [p0.port().link_up(), p1.port().link_up()];
            r.check(
                "card-link-up",
                up == [true, true],
                format_args!(
                    "STAT_RX_STATUS over MMIO: port 0 up {}, port 1 up {}",
                    up[0], up[1]
                ),
            );
            Some(Card {
                hosts: [h0, h1],
                ports: [p0, p1],
            })
        }
        [p0, p1] => {
            for (_, port) in [p1, p0].into_iter().flatten() {
                port.remove();
            }
            None
        }
    }
}

/// The queues of both ports, traffic in both directions, teardown.
fn drive(r: &mut Runner, mut card: Card<'_>, dma: &IdentityDma) {
    if start(r, &mut card) {
        for from in 0..2 {
            wire(r, &mut card, from);
        }
        teardown(r, &mut card, dma);
    }
    teardown_devices(r, card);
}

/// Opens both ports with RX buffers of [`BUF`]; checks every queue index's contexts read back
/// over MMIO, its RX ring full and its page census exact.
fn start(r: &mut Runner, card: &mut Card<'_>) -> bool {
    let mut failure = None;
    for port in &mut card.ports {
        let opened = BufSizeIdx::new(BUF)
            .map_err(|_| PortError::Invalid)
            .and_then(|buf| {
                port.set_tuning(QueueTuning {
                    bufs: RxBufSizes::all(buf),
                    ..QueueTuning::default()
                })
            })
            .and_then(|()| port.open());
        if let Err(e) = opened {
            failure.get_or_insert(e);
        }
    }
    let mut programmed = 0;
    for (host, port) in card.hosts.iter().zip(&mut card.ports) {
        let census = pool_census(host, port);
        programmed += (0..QUEUES)
            .filter(|&q| as_programmed(port, q) && census.as_ref().is_ok_and(|c| c.rx_rings_full))
            .count();
    }
    let want = 2 * usize::from(QUEUES);
    match failure {
        None => r.check(
            "card-pairs",
            programmed == want,
            format_args!(
                "{programmed}/{want} queue indices opened through the ports; contexts read back over MMIO as programmed, RX rings full, page census exact"
            ),
        ),
        Some(e) => r.check("card-pairs", false, format_args!("a port did not open: {e}")),
    }
}

/// Reads queue index `q`'s contexts back (the stack's TX ring against the reference H2C
/// context; SW C2H, prefetch and CMPT with the port's ring and buffer sizes) and checks that its
/// RX ring is full.
fn as_programmed(port: &mut CardPort<'_>, q: u16) -> bool {
    let func = port.port().func();
    let Ok(ctx) = port.control(|p, c| p.queue_contexts(c, q)) else {
        return false;
    };
    let Some(view) = port.inspect(q) else {
        return false;
    };
    let usable = view.pair.rx.config().desc_ring.usable();
    let want_h2c = SwCtxt::reference_h2c(func, view.stack.ring_dma_addr(), RING, q);
    let c2h = ctx.rx_sw;
    ctx.tx_sw == want_h2c
        && c2h.qen()
        && c2h.func_id() == func.get()
        && c2h.rngsz_idx() == RING
        && ctx.pfch.valid()
        && ctx.pfch.bufsz_idx() == BUF
        && ctx.cmpt.valid()
        && ctx.cmpt.intr_en()
        && ctx.cmpt.vec() == q
        && ctx.cmpt.base_addr() == view.pair.rx.cmpt_ring_dma_addr()
        && view.pair.rx.posted() == usable - 1
}

/// One port's pools, counted.
struct PoolPages {
    /// Pages the pools took from the DMA memory and hold.
    live: u64,
    /// Every RX ring holds a page in each usable slot.
    rx_rings_full: bool,
    /// No page is with the stack, redirected, or on an XDP_TX ring.
    all_home: bool,
}

/// The page census of `port`'s pools (every page somewhere, the stack's count as the RX path
/// says), summed.
fn pool_census(host: &CardHost<'_>, port: &mut CardPort<'_>) -> Result<PoolPages, String> {
    let holdings = port.holdings().map_err(|e| alloc::format!("{e}"))?;
    let pools = host.check_census(&holdings).map_err(|e| alloc::format!("{e}"))?;
    let usable = RingSizeIdx::new(RING).map_or(0, |r| u64::from(r.usable()));
    Ok(PoolPages {
        live: pools.iter().map(|c| c.live).sum(),
        rx_rings_full: holdings.iter().all(|(_, h)| h.in_rx_ring == usable - 1),
        all_home: pools.iter().all(|c| c.received == 0 && c.redirected == 0)
            && holdings
                .iter()
                .all(|(_, h)| h.in_tx_flight == 0 && h.tx_parked == 0),
    })
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
    /// Packets of the stack back through their rings' reclaim.
    tx_done: u64,
    /// Polls made.
    polls: u64,
    /// Packets on each port's stack TX rings after the last reclaim.
    in_flight: [u32; 2],
    /// The first error a poll or reclaim reported.
    error: Option<CardError>,
}

impl Polled {
    /// Counts one reclaim of a stack TX ring.
    fn reclaimed(&mut self, c: &TxClean) {
        self.tx_done += u64::from(c.packets);
        if c.error {
            self.error.get_or_insert(CardError::TxRing);
        }
    }
}

/// One poll of every queue index of both ports, NAPI without the interrupt: up to [`BUDGET`]
/// frames up to the stack, the stack TX ring reclaimed; then each stack shows the tally what it
/// received and gives the pages back to their pools, as a socket reading them would.
fn poll_all(card: &mut Card<'_>, tally: &mut Tally, out: &mut Polled) {
    for (f, (host, port)) in card.hosts.iter().zip(&mut card.ports).enumerate() {
        out.in_flight[f] = 0;
        for q in 0..QUEUES {
            let (_, poll): (_, Option<PairPoll>) = port.poll_outcome(q, BUDGET, (), None);
            if let Some(e) = poll.and_then(|p| p.rx.error) {
                out.error.get_or_insert(CardError::Queue(e));
            }
            let clean = port.queue::<TxLock, _>(q, |p, t| p.tx_clean(t, BUDGET));
            out.reclaimed(&clean);
            out.in_flight[f] += clean.in_flight;
            out.polls += 1;
        }
        host.drain_received(|fr| tally.on_frame(fr.port, fr.qid, fr.data()));
    }
}

/// Queues frames `ids` of the direction on the sending port's stack TX rings (frame `id` on
/// queue index `id % QUEUES`, one xmit-more batch per ring), each recorded in the tally with the
/// RX queue `steer` gives it, then rings each ring's doorbell once.
fn send_round(
    card: &mut Card<'_>,
    from: usize,
    (tally, out): (&mut Tally, &mut Polled),
    steer: &Steering,
    ids: core::ops::Range<u32>,
) -> Result<(), CardError> {
    let (host, port) = (&card.hosts[from], &mut card.ports[from]);
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
        let Some(skb) = host.packet(frame) else {
            result = Err(CardError::NoPage);
            break;
        };
        // CAST: the remainder is below QUEUES.
        let q = (id % u32::from(QUEUES)) as u16;
        let mut done = TxClean::default();
        let sent = port.queue::<TxLock, _>(q, |p, t| p.xmit(t, skb, &mut done));
        out.reclaimed(&done);
        if !matches!(sent, XmitResult::Ok | XmitResult::OkStop) {
            onic_embed::port::Host::skb_done(host, skb, None);
            result = Err(CardError::Refused);
            break;
        }
    }
    for q in 0..QUEUES {
        port.queue::<TxLock, _>(q, |p, t| p.tx_flush(t));
    }
    result
}

/// Polls until every frame of the tally arrived and the sending port's TX rings are empty, or
/// [`WAIT_NS`] passes.
fn settle(card: &mut Card<'_>, tally: &mut Tally, from: usize, out: &mut Polled) -> Result<(), CardError> {
    let deadline = time::nanos_since_boot() + WAIT_NS;
    loop {
        poll_all(card, tally, out);
        if let Some(e) = out.error {
            return Err(e);
        }
        let in_flight = out.in_flight[from];
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
/// packets and bytes per port (RX, TX) as the ports publish them.
struct Snapshot {
    hw: [[u64; HW_COUNTERS]; 2],
    rx: [(u64, u64); 2],
    tx: [(u64, u64); 2],
}

impl Snapshot {
    fn take(card: &Card<'_>) -> Self {
        let s = card.ports.each_ref().map(|p| p.port().link_stats());
        Self {
            hw: card.ports.each_ref().map(|p| p.port().hw_counters()),
            rx: s.map(|s| (s.rx_packets, s.rx_bytes)),
            tx: s.map(|s| (s.tx_packets, s.tx_bytes)),
        }
    }
}

/// One direction: frames of [`FLOWS`] flows in every size of [`SIZES`] from the stack TX rings
/// of port `from`, out of its CMAC, over the cable, up the other port's RX queues to its stack.
fn wire(r: &mut Runner, card: &mut Card<'_>, from: usize) {
    let to = 1 - from;
    let steer = Steering::read_back(card.ports[to].port());
    // CAST: to < 2; SIZES has 22 entries.
    let mut tally = Tally::new(to as u8);
    let total = FLOWS * SIZES.len() as u32;
    let before = Snapshot::take(card);
    let mut polled = Polled::default();
    let start = time::nanos_since_boot();
    let mut result = Ok(());
    let mut next = 0;
    while next < total && result.is_ok() {
        let end = (next + ROUND).min(total);
        result = send_round(card, from, (&mut tally, &mut polled), &steer, next..end)
            .and_then(|()| settle(card, &mut tally, from, &mut polled));
        next = end;
    }
    let us = (time::nanos_since_boot() - start) / 1000;
    let after = Snapshot::take(card);
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
            "{}/{sent} frames ({} bytes, {FLOWS} flows x {} sizes) from port {from}'s stack TX rings came up port {to}'s \
             RX queues to its stack in {us} us: {} corrupt, {} on another queue than RSS chose, {} stray; {} packets \
             back through their rings' reclaim; {} polls{}{}",
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

/// The page census, then every queue index of both ports stopped (each queue invalidated: the
/// `Quiesced` proof the core takes before it gives a ring's pages back), its contexts read back
/// invalid.
fn teardown(r: &mut Runner, card: &mut Card<'_>, dma: &IdentityDma) {
    let mut census = Ok((0, true));
    for (host, port) in card.hosts.iter().zip(&mut card.ports) {
        census = census.and_then(|(live, home)| {
            pool_census(host, port).map(|c| (live + c.live, home && c.all_home && host.census().packets == 0))
        });
    }
    // Every packet of the stack completed: the buffers the hosts keep for the next ones go.
    for host in &card.hosts {
        host.free_spare();
    }
    let live = dma.stats().live_pages;
    let (pool_pages, all_home) = census.as_ref().map_or((0, false), |&(p, h)| (p, h));
    r.check(
        "card-page-census",
        all_home && live == pool_pages,
        format_args!(
            "every pool's pages are in its cache or its RX ring ({pool_pages} pages), none with the stack, redirected \
             or in flight; the DMA memory has {live} pages out{}",
            census.err().map(|e| alloc::format!("; census: {e}")).unwrap_or_default()
        ),
    );
    let down = card
        .ports
        .iter_mut()
        .map(SoloPort::stop)
        .filter(Result::is_ok)
        .count()
        == 2;
    let invalid = card
        .ports
        .iter_mut()
        .flat_map(|port| {
            (0..QUEUES)
                .map(|q| port.control(|p, c| p.queue_contexts(c, q)))
                .collect::<Vec<_>>()
        })
        .filter(|ctx| ctx.as_ref().is_ok_and(|c| !c.tx_sw.qen() && !c.cmpt.valid()))
        .count();
    let left = dma.stats();
    r.check(
        "card-pairs-teardown",
        down && invalid == 2 * usize::from(QUEUES) && left.live_pages == 0 && left.live_regions == 0,
        format_args!(
            "{invalid}/{} queue indices stopped and invalidated over MMIO (contexts read back disabled), every page \
             back to its pool and from there to the DMA memory ({} pages, {} rings left)",
            2 * QUEUES,
            left.live_pages,
            left.live_regions
        ),
    );
}

/// PF1, then the master PF0, taken down through their ports.
fn teardown_devices(r: &mut Runner, card: Card<'_>) {
    let [p0, p1] = card.ports;
    let down = [p1, p0]
        .into_iter()
        .map(SoloPort::shut_down)
        .filter(Result::is_ok)
        .count();
    r.check(
        "card-device-teardown",
        down == 2,
        format_args!(
            "{down}/2 functions taken down (PF1, then the master PF0): QCONF and FMAP cleared over MMIO"
        ),
    );
}
