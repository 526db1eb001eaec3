//! The card as an emulator's PCI device sees it: BAR accesses in, the model run on the
//! emulator's clock, interrupts, frames and log lines out through a [`Host`], and the test
//! control window. Safe Rust; the C entry points (`ffi.rs`) wrap it.

use std::string::ToString;

use onic_hal::RegisterWindow;
use onic_sim::{AccessProblem, Card, CardConfig, Corruption, DeviceBus, SimStats, Violation, Wire};

use crate::ctl;
use crate::gen::Generator;

/// What the emulator provides besides DMA (the [`DeviceBus`] half).
pub trait Host: DeviceBus + Clone + 'static {
    /// Raise MSI-X vector `vector` of PCI function `func`.
    fn irq(&self, func: u8, vector: u16);
    /// A frame left port `port` for the outside (only with [`ModelConfig::open_ports`]).
    fn egress(&self, port: u8, frame: &[u8]);
    /// A line for the emulator's log (violations the model recorded).
    fn log(&self, line: &str);
}

/// The card's build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelConfig {
    /// PCI functions of the card (1..=4).
    pub functions: u8,
    /// CMAC ports (1..=2).
    pub ports: u8,
    /// The shell's queue budget (NUM_QUEUE).
    pub total_queues: u16,
    /// `false`: port 0 and port 1 are cabled to each other. `true`: each port's frames go to
    /// [`Host::egress`] and come in through [`Model::inject`] (an emulator's network backend).
    pub open_ports: bool,
}

/// Which BAR of a function an access is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bar {
    /// BAR0: the QDMA's configuration space.
    Qdma,
    /// BAR2: the shell's registers.
    Shell,
}

/// Violations written to the log one by one; after that they are only counted.
const LOGGED_VIOLATIONS: u32 = 64;

/// The emulated card: the model, its host and the counters of the control window.
#[derive(Debug)]
pub struct Model<H: Host> {
    card: Card,
    host: H,
    cfg: ModelConfig,
    /// Host time (ns) the model's clock was last brought to.
    last_now: Option<u64>,
    violations: u32,
    bus_faults: u32,
    /// Device accesses that never left the card: the function's bus mastering was off.
    blocked_dma: u32,
    interrupts: u32,
    bad_mmio: u32,
    gone: bool,
    /// The traffic generator of the control window.
    gen: Generator,
}

impl<H: Host> Model<H> {
    /// A card in its power-on state whose DMA goes through `host`.
    pub fn new(cfg: ModelConfig, host: H) -> Self {
        Self {
            card: Self::fresh_card(cfg, &host),
            host,
            cfg,
            last_now: None,
            violations: 0,
            bus_faults: 0,
            blocked_dma: 0,
            interrupts: 0,
            bad_mmio: 0,
            gone: false,
            gen: Generator::default(),
        }
    }

    fn fresh_card(cfg: ModelConfig, host: &H) -> Card {
        let mut card_cfg = CardConfig::default();
        card_cfg.functions = cfg.functions;
        card_cfg.ports = cfg.ports;
        card_cfg.total_queues = cfg.total_queues;
        card_cfg.wire = if cfg.open_ports { Wire::Open } else { Wire::Cable };
        card_cfg.capture_egress = cfg.open_ports;
        Card::with_bus(card_cfg, Box::new(host.clone()))
    }

    /// Back to the power-on state (a PCI reset of the card); the counters and the traffic
    /// generator (both the control window's, not the card's) stay.
    pub fn reset(&mut self) {
        self.card = Self::fresh_card(self.cfg, &self.host);
        self.last_now = None;
        self.gone = false;
    }

    /// A read of `size` bytes at `offset` of `bar` by function `func`.
    pub fn bar_read(&mut self, func: u8, bar: Bar, offset: u64, size: u32) -> u32 {
        let Some(offset) = self.register(offset, size) else {
            return u32::MAX;
        };
        match bar {
            Bar::Qdma => self.card.qdma(func).read32(offset),
            Bar::Shell => self.card.shell().read32(offset),
        }
    }

    /// A write of `size` bytes at `offset` of `bar` by function `func`; the card then does the
    /// work it caused (the caller runs [`Model::run`] to deliver it).
    pub fn bar_write(&mut self, func: u8, bar: Bar, offset: u64, size: u32, value: u32) {
        let Some(offset) = self.register(offset, size) else {
            return;
        };
        match bar {
            Bar::Qdma => self.card.qdma(func).write32(offset, value),
            Bar::Shell => self.card.shell().write32(offset, value),
        }
    }

    /// The register an access reaches: `None` when the card is gone or the access is not an
    /// aligned 32-bit one (counted: the shell's registers take nothing else).
    fn register(&mut self, offset: u64, size: u32) -> Option<u32> {
        if self.gone {
            return None;
        }
        match u32::try_from(offset) {
            Ok(o) if size == 4 && o % 4 == 0 => Some(o),
            _ => {
                self.bad_mmio = self.bad_mmio.saturating_add(1);
                None
            }
        }
    }

    /// Brings the model's clock to host time `now_ns`, lets the card do all pending work
    /// (transmit, receive, completion timers) and delivers what came of it: interrupts, frames
    /// for the outside, violations to the log. Frames of the traffic generator due by then
    /// arrive first. Returns the host time at which the card next needs to run (a completion
    /// timer or the generator's next frame), if any.
    pub fn run(&mut self, now_ns: u64) -> Option<u64> {
        if self.gone {
            return None;
        }
        let elapsed = self.last_now.map_or(0, |t| now_ns.saturating_sub(t));
        self.last_now = Some(now_ns);
        for frame in self.gen.due(now_ns) {
            if self.gen.egress {
                // Out onto the port's wire: to the network backend (delivered below with the
                // card's own egress) or across the cable to the other port.
                self.card.emit(self.gen.port, &frame);
            } else {
                // The ingress of a frame from the emulator's network backend (`inject`),
                // whether the ports are open or cabled to each other.
                self.card.inject(self.gen.port, &frame);
            }
        }
        self.card.run_until_idle();
        // Completion timers that expired by now fire (status writes and interrupts only: no
        // new engine work comes of them).
        self.card.advance_time(elapsed);
        self.deliver();
        let model_now = self.card.now_ns();
        let timer = self
            .card
            .next_deadline_ns()
            .map(|d| now_ns.saturating_add(d.saturating_sub(model_now)));
        match (timer, self.gen.next_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The card's own counters of what happened to frames and descriptors.
    #[must_use]
    pub fn sim_stats(&self) -> SimStats {
        self.card.stats()
    }

    fn deliver(&mut self) {
        for irq in self.card.take_interrupts() {
            self.interrupts = self.interrupts.wrapping_add(1);
            self.host.irq(irq.func, irq.vector);
        }
        if self.cfg.open_ports {
            for port in 0..self.cfg.ports {
                for frame in self.card.take_egress(port) {
                    self.host.egress(port, &frame);
                }
            }
        }
        for v in self.card.take_violations() {
            self.record(&v);
        }
    }

    fn record(&mut self, v: &Violation) {
        if matches!(
            v,
            Violation::DeviceAccess {
                problem: AccessProblem::MasterOff,
                ..
            }
        ) {
            // The driver switched the function's DMA off on purpose: counted, not a mistake.
            self.blocked_dma = self.blocked_dma.saturating_add(1);
            return;
        }
        if matches!(
            v,
            Violation::DeviceAccess {
                problem: AccessProblem::BusFault,
                ..
            }
        ) {
            self.bus_faults = self.bus_faults.saturating_add(1);
        }
        self.violations = self.violations.saturating_add(1);
        if self.violations <= LOGGED_VIOLATIONS {
            self.host
                .log(&("onic-card: model violation: ".to_string() + &v.to_string()));
        } else if self.violations == LOGGED_VIOLATIONS + 1 {
            self.host
                .log("onic-card: further violations are counted, not logged");
        }
    }

    /// A frame arrives at `port` from the outside (open ports only; ignored otherwise), as a
    /// QEMU network backend hands it over: without its FCS and, from most of QEMU's NIC models,
    /// not padded. On a real wire the sending MAC pads every frame to the Ethernet minimum, so
    /// the card receives it as that MAC would have sent it ([`padded_for_wire`]); otherwise
    /// the CMAC would count a 42-byte ARP request as a runt and drop it.
    pub fn inject(&mut self, port: u8, frame: &[u8]) {
        if self.cfg.open_ports && !self.gone {
            self.card.inject(port, &padded_for_wire(frame));
        }
    }

    /// A read of the control window.
    #[must_use]
    pub fn ctl_read(&self, offset: u64) -> u32 {
        match u32::try_from(offset).unwrap_or(u32::MAX) {
            ctl::MAGIC => ctl::MAGIC_VALUE,
            ctl::VERSION => ctl::VERSION_VALUE,
            ctl::LINK => self.link_mask(),
            ctl::VIOLATIONS => self.violations,
            ctl::BUS_FAULTS => self.bus_faults,
            ctl::BLOCKED_DMA => self.blocked_dma,
            ctl::GONE => u32::from(self.gone),
            ctl::INTERRUPTS => self.interrupts,
            ctl::BAD_MMIO => self.bad_mmio,
            ctl::GEN_PORT => self.gen.port.into(),
            ctl::GEN_LEN => self.gen.frame_len(),
            ctl::GEN_INTERVAL_NS => self.gen.interval_ns(),
            ctl::GEN_DST_MAC_HI => u32::from(u16::from_be_bytes([self.gen.dst_mac[0], self.gen.dst_mac[1]])),
            ctl::GEN_DST_MAC_LO => {
                let m = self.gen.dst_mac;
                u32::from_be_bytes([m[2], m[3], m[4], m[5]])
            }
            ctl::GEN_DST_IP => u32::from_be_bytes(self.gen.dst_ip),
            ctl::GEN_DST_PORT => self.gen.dst_port.into(),
            ctl::GEN_RUN => u32::from(self.gen.running()),
            ctl::GEN_FRAMES => self.gen.generated() as u32,
            ctl::GEN_EGRESS => u32::from(self.gen.egress),
            _ => 0,
        }
    }

    fn link_mask(&self) -> u32 {
        (0..self.cfg.ports)
            .filter(|&p| self.card.link_up(p))
            .fold(0, |m, p| m | 1 << p)
    }

    /// A write of the control window.
    pub fn ctl_write(&mut self, offset: u64, value: u32) {
        let faults = self.card.faults();
        match u32::try_from(offset).unwrap_or(u32::MAX) {
            ctl::LINK => {
                for p in 0..self.cfg.ports {
                    self.card.set_link(p, value & 1 << p != 0);
                }
            }
            ctl::TX_STALL => faults.stall_h2c_writeback(value != 0),
            ctl::CMPT_FREEZE => faults.freeze_cmpt_color(value != 0),
            ctl::CMPT_STATUS_FREEZE => faults.freeze_cmpt_status(value != 0),
            ctl::CTXT_BUSY => faults.hold_context_commands(value != 0),
            ctl::CORRUPT_CMPT => {
                let how = match value >> 16 {
                    1 => Some(Corruption::ErrBit),
                    2 => Some(Corruption::LengthZero),
                    3 => Some(Corruption::LengthTooLarge),
                    _ => None,
                };
                if let Some(how) = how {
                    faults.corrupt_next_completions(value & 0xFFFF, how);
                }
            }
            ctl::DROP_FRAMES => faults.drop_next_frames(value),
            ctl::BAD_FCS => faults.bad_fcs_next_frames(value),
            ctl::FEC_ERRORS => faults.fec_errors_next_frames(value & 0xFFFF, value >> 16),
            ctl::RAISE_ERROR => {
                faults.raise_error((value >> 24) as usize, value & 0x00FF_FFFF);
            }
            ctl::VIOLATIONS => {
                self.violations = 0;
                self.bus_faults = 0;
                self.blocked_dma = 0;
            }
            // Back on the bus after a link down: the functions were reset (PCIe resets a
            // function whose link went down), so the card starts from power-on.
            ctl::GONE if value == 0 && self.gone => self.reset(),
            ctl::GONE => self.gone = value != 0,
            _ => self.gen_write(offset, value),
        }
    }

    /// A write of one of the traffic generator's knobs (anything else is ignored).
    fn gen_write(&mut self, offset: u64, value: u32) {
        let g = &mut self.gen;
        match u32::try_from(offset).unwrap_or(u32::MAX) {
            ctl::GEN_PORT => {
                if let Some(p) = u8::try_from(value).ok().filter(|&p| p < self.cfg.ports) {
                    g.port = p;
                }
            }
            ctl::GEN_LEN => g.set_len(value),
            ctl::GEN_INTERVAL_NS => g.set_interval(value),
            ctl::GEN_DST_MAC_HI => {
                if let Ok(hi) = u16::try_from(value) {
                    g.dst_mac[..2].copy_from_slice(&hi.to_be_bytes());
                }
            }
            ctl::GEN_DST_MAC_LO => g.dst_mac[2..].copy_from_slice(&value.to_be_bytes()),
            ctl::GEN_DST_IP => g.dst_ip = value.to_be_bytes(),
            ctl::GEN_DST_PORT => g.set_dst_port(value),
            ctl::GEN_RUN if value <= 1 => g.set_running(value == 1),
            ctl::GEN_EGRESS if value <= 1 => g.egress = value == 1,
            _ => {}
        }
    }
}

/// `frame` zero-padded to the smallest frame a MAC puts on the wire (60 bytes before the FCS),
/// as the sending NIC's MAC would; longer frames unchanged.
#[must_use]
pub fn padded_for_wire(frame: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let min = onic_sim::MIN_WIRE_LEN - onic_sim::FCS_LEN;
    if frame.len() >= min {
        return std::borrow::Cow::Borrowed(frame);
    }
    let mut padded = frame.to_vec();
    padded.resize(min, 0);
    std::borrow::Cow::Owned(padded)
}
