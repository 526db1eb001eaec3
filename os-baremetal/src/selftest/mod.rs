//! The boot-time self-test: a list of named checks, each printed as PASS or FAIL on the console
//! and through defmt, then a report and the verdict that becomes QEMU's exit status.
//!
//! The checks run in groups, in this order (the bare pairs' groups on one card, then the port
//! bench's on another):
//!
//! | module | what it covers |
//! |---|---|
//! | [`platform`] | boot protocol, memory, heap, TSC calibration, delay, timer tick, IDT |
//! | [`bringup`] | `Device::init` of PF0 and PF1 on the model, CMACs, link, statistics, the tick's latch |
//! | [`queues`] | TX context programming read back; the queue pairs built and started through `Device` |
//! | [`verdicts`] | on the bare pairs, the two verdicts that show pieces of the core a port does not use: XDP_PASS with the OS's pages home partly through the pools' recycle rings, XDP_REDIRECT through a devmap of the other PF's TX queues |
//! | [`faults`] | on the bare pairs, the fault the teardown's pool statistics account for: page allocations refused once a pool ran dry |
//! | [`teardown`] | page census, queue pair and device teardown, DMA accounting, model violations; the heap balance after the groups on ports |
//! | [`traffic`] | on a fresh card, both functions as ports ([`portbench`]): frames of many flows and sizes sent by one port's stack TX rings, carried by the cable, received by the other port: steering, integrity, oversize drops, TX completions, per-queue MSI-X vectors, NAPI, counters |
//! | [`rss`] | on the same ports: ethtool-style RSS changes (`-X equal`, a new key, refused requests) through the port, taking effect on later frames |
//! | [`verdicts`] (`run_on_ports`) | on the same ports: XDP programs in the port's polls: drop, TX, a program swap and a detach under traffic, with the core's counters |
//! | [`faults`] (`run_on_ports`) | on the same ports, the model's fault knobs: completion errors, stuck H2C writeback, XDP_TX onto a stuck ring, wire loss, bad FCS, a status pidx jump that stops a queue, which is restarted through the port with its pool refusing a page |
//! | [`bpf`] | on the same ports: the clang-built objects of `os-linux/xdp` through the `onic-bpf` engine in the port's polls: verdict counts, agreement with the core's counters, each object's own result |
//! | [`port`] | on a fresh card, both functions as `onic_embed` ports (the kernel module's door) over the model host: traffic through the stack TX rings, XDP_TX and drops, the page census, teardown |
//! | [`xsk`] | on fresh cards, AF_XDP zero copy through the port (the scenario of `onic run --xsk`): rxdrop, l2fwd and txonly byte for byte, the UMEM's strict census, every page home |
//! | [`card`] | the card as a PCI device (QEMU's `onic-card`), when present: configuration space scan, BARs, both functions as `onic_embed` ports over MMIO, DMA at physical addresses, traffic between the ports by polling, teardown |
//! | `bpfdiff` | with feature `bpf-bundle` only: the BPF differential set (`cargo xtask bpf-diff`'s bundle) through the `onic-bpf` engine, against the kernel's outcomes |
//!
//! [`datapath`] holds the machinery the groups on the bare pairs share (the pairs, the main loop,
//! the OS side), [`portbench`] that of the groups on ports over the model host (the ports, the
//! interrupt-driven main loop polling through them), and [`xdp`] the XDP programs.
//!
//! To add a check, call [`Runner::check`] from the group it belongs to (or add a group module and
//! call it from [`run`]); the report and the verdict pick it up.

mod bpf;
#[cfg(feature = "bpf-bundle")]
mod bpfdiff;
mod bringup;
mod card;
mod datapath;
mod faults;
mod frames;
mod platform;
mod port;
mod portbench;
mod queues;
mod report;
mod rss;
mod teardown;
mod traffic;
mod verdicts;
mod xdp;
mod xsk;

use core::fmt;

use heapless::Vec;
use onic_core::device::Rss;
use onic_core::{Device, DeviceConfig};
use onic_sim::{Card, CardConfig, QdmaWindow, ShellWindow, SimDma};

use crate::exit::ExitCode;
use crate::model::{Guarded, Model};
use crate::platform::boot::BootProtocol;
use crate::time::Calibration;

/// What the boot code found out before the self-test.
pub struct Boot {
    /// How the image was entered.
    pub protocol: BootProtocol,
    /// The TSC calibration.
    pub calibration: Calibration,
}

/// Most checks one run can record.
const MAX_CHECKS: usize = 160;

/// One check's result.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// The check's name.
    pub name: &'static str,
    /// Whether it passed.
    pub passed: bool,
}

/// Runs and records checks.
pub struct Runner {
    outcomes: Vec<Outcome, MAX_CHECKS>,
    overflowed: bool,
}

impl Runner {
    fn new() -> Self {
        Self {
            outcomes: Vec::new(),
            overflowed: false,
        }
    }

    /// Starts a group of checks.
    pub fn group(&mut self, title: &str) {
        crate::println!();
        crate::println!("== {}", title);
        defmt::info!("== {=str}", title);
    }

    /// Records check `name` with its result and a one-line explanation; returns `passed`.
    pub fn check(&mut self, name: &'static str, passed: bool, detail: fmt::Arguments<'_>) -> bool {
        let tag = if passed { "PASS" } else { "FAIL" };
        crate::println!("  {} {}: {}", tag, name, detail);
        if passed {
            defmt::info!("PASS {=str}: {}", name, defmt::Display2Format(&detail));
        } else {
            defmt::error!("FAIL {=str}: {}", name, defmt::Display2Format(&detail));
        }
        if self.outcomes.push(Outcome { name, passed }).is_err() {
            self.overflowed = true;
        }
        passed
    }

    /// Prints a line that records no check: a group that does not apply to this run says why.
    pub fn note(&mut self, detail: fmt::Arguments<'_>) {
        crate::println!("  NOTE {}", detail);
        defmt::info!("NOTE {}", defmt::Display2Format(&detail));
    }

    /// Records a check that could not run because an earlier step failed.
    pub fn skipped(&mut self, name: &'static str, why: &str) -> bool {
        self.check(name, false, format_args!("not run: {why}"))
    }

    /// Number of checks recorded.
    #[must_use]
    pub fn total(&self) -> usize {
        self.outcomes.len()
    }

    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes.iter().filter(|o| !o.passed)
    }

    /// Whether every check passed (and there were some, and all were recorded).
    #[must_use]
    pub fn all_passed(&self) -> bool {
        !self.overflowed && !self.outcomes.is_empty() && self.failures().next().is_none()
    }
}

/// The driver-side view of the model for one PCI function.
pub type SimDevice<'c> = Device<Guarded<QdmaWindow<'c>>, Guarded<ShellWindow<'c>>>;
/// The DMA memory the driver gets.
pub type SimDmaMem<'c> = Guarded<SimDma<'c>>;

/// Queue pairs each PF brings up.
pub const QUEUES: u16 = datapath::PAIRS as u16;
/// The PCI functions the self-test drives.
pub const PFS: [u8; 2] = [0, 1];

/// Everything the groups share: the model, the two brought-up functions and their queue pairs
/// (whose pools borrow their recycle rings for `'s`).
pub struct Bench<'c, 's> {
    /// The model.
    pub model: &'c Model<'c>,
    /// PF0 and PF1 once `bringup` succeeded.
    pub devices: [Option<SimDevice<'c>>; 2],
    /// Their RSS states, which the RSS group changes.
    pub rss: [Option<Rss>; 2],
    /// The queue pairs and the main loop's state.
    pub dp: datapath::Datapath<'c, 's>,
}

/// The model's configuration: the stock shell (2 PFs, 2 ports, a cable between the ports), with
/// unpoisoned pages left as the default poison so a stale read shows.
fn card_config() -> CardConfig {
    CardConfig::default()
}

/// Device configuration of `func`.
fn device_config(func: u8) -> Option<DeviceConfig> {
    DeviceConfig::new(func, QUEUES).ok()
}

/// Runs every group, prints the report, and returns the verdict.
pub fn run(boot: &Boot) -> ExitCode {
    let mut r = Runner::new();
    let start_ns = crate::time::nanos_since_boot();
    platform::run(&mut r, boot);

    let heap_before = crate::heap::stats().in_use;
    let card = Card::new(card_config());
    {
        let model = Model::new(&card);
        let mut bench = Bench {
            model: &model,
            devices: [None, None],
            rss: [None, None],
            dp: datapath::Datapath::new(
                model.dma(),
                [datapath::Steering::initial(), datapath::Steering::initial()],
            ),
        };
        bringup::run(&mut r, &mut bench);
        queues::run(&mut r, &mut bench);
        verdicts::run(&mut r, &mut bench);
        faults::run(&mut r, &mut bench);
        #[cfg(feature = "panic-check")]
        deliberate_panic(r.total());
        let summary = teardown::run(&mut r, &mut bench);
        report::print(&bench, &summary);
    }
    drop(card);
    on_ports(&mut r);
    teardown::heap_balance(&mut r, heap_before);
    port::run(&mut r);
    xsk::run(&mut r);
    card::run(&mut r);
    #[cfg(feature = "bpf-bundle")]
    bpfdiff::run(&mut r);

    #[cfg(feature = "fail-check")]
    r.check(
        "deliberate-failure",
        false,
        format_args!("built with feature fail-check: this check always fails"),
    );

    report::verdict(&r, crate::time::nanos_since_boot() - start_ns)
}

/// The groups on ports ([`portbench`]): a fresh card, both functions as `SoloPort`s, which the
/// last group takes down.
fn on_ports(r: &mut Runner) {
    let card = Card::new(card_config());
    // The card's clock is at 0 when the timer starts moving it.
    let (model, clock_base) = crate::platform::without_interrupts(|| {
        (
            Model::new(&card),
            crate::irq::MODEL_TIME_NS.load(core::sync::atomic::Ordering::Relaxed),
        )
    });
    let mut bench = match portbench::PortBench::new(&model, clock_base) {
        Ok(b) => Some(b),
        Err(e) => {
            r.note(format_args!("the ports did not come up: {e}"));
            None
        }
    };
    traffic::run(r, bench.as_mut());
    rss::run(r, bench.as_mut());
    verdicts::run_on_ports(r, bench.as_mut());
    faults::run_on_ports(r, bench.as_mut());
    bpf::run(r, bench, &card);
}

/// Panics in the middle of the run (feature panic-check), to show the panic handler's report and
/// exit status.
#[cfg(feature = "panic-check")]
fn deliberate_panic(checks: usize) {
    if checks > 0 {
        panic!("deliberate panic (feature panic-check) after {checks} checks");
    }
}
