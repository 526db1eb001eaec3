//! `cargo xtask vm-bench`: the module's throughput tables, measured in VM boots with the
//! configurations side by side (`os-linux/vm/bench.sh` is the guest's `/init`). Not part of CI.
//!
//! (a) the RX memory model: `page_pool` against a page allocated and mapped per packet
//!     (`rx_page_pool=0`), iperf3 UDP per frame size and TCP;
//! (b) XDP: not built in (`xdp=0`), built in with no program, an XDP_PASS program, iperf3 UDP per
//!     frame size;
//! (c) XDP_DROP and XDP_TX per frame size: the kernel's pktgen sends at full speed, Debian's
//!     `xdp-bench drop` or `xdp-bench tx` runs on the receiving port, the rate is that port's
//!     received frames over the sending time;
//! (d) AF_XDP (the card only): `os-linux/vm/onic_xsk.c` in rxdrop or l2fwd on the receiving
//!     port's one queue, zero copy against copy mode, pktgen sending UDP to the program's port.
//!
//! Each on a device of its own boot (`--dev`): the module in simulation mode (`sim`), the module
//! on the QEMU card (`pci`), and the peer, the kernel's virtio_net on two virtio-net-pci NICs
//! joined by a QEMU hub (`virtio`), the same tools in the same namespaces.
//!
//! `--sender guest` sends from a second guest instead (pci and virtio only): its virtio NIC is
//! cabled to the device's port 0 by a QEMU socket netdev (UDP on the host's loopback), and the
//! guests talk over a second such cable (`os-linux/vm/bench.sh`), so the measured guest's
//! instructions are its receiving driver's and stack's alone, as with the seed's separate
//! sending machine. The sender runs without icount (its speed is not measured).
//!
//! `--sender card` (pci and virtio) sends from the QEMU card itself: the traffic generator of
//! its control window (`qemu-card/src/gen.rs`) puts UDP frames on port 0 (with the virtio peer,
//! out of port 0 to a QEMU hub shared with the virtio NIC) at a fixed interval of QEMU's
//! virtual clock, [`CARD_INTERVAL_NS`] apart (`--gen-ns N` for another interval: shorter than
//! the receiver's cost of a frame, it measures the receiver saturated). Under `--icount` that
//! clock is the guest's instruction count, so the frames arrive at the same points of the
//! guest's work in every run (a sender guest's arrive on the host's clock), and the figures
//! repeat. UDP and XDP only: a generator that does not answer cannot carry TCP.
//!
//! `--icount` runs each guest with one vCPU under QEMU's `-icount shift=0,sleep=off`: guest time
//! advances by one nanosecond per guest instruction and not with the host's clock, so the figures
//! do not move with the host's load, and the guest's busy time is its instruction count (each
//! rate gets its instructions per packet beside it). The boots then run side by side.
//!
//! `--tables` measures some of the four tables; `--iommu` puts the QEMU card behind QEMU's Intel
//! IOMMU (strict mode, `intel_iommu=on`); `--profile` counts the measured guest's instructions
//! per function in every window with a QEMU plugin (`insnprof.rs`), printed as a table per
//! figure.
//!
//! The guest prints `BENCH <table> <configuration> <what> <value> <unit>` lines; they are turned
//! into markdown tables with ratios against the first configuration of each device.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::root;
use crate::vm::{build_xdp, initramfs, pci_card_machine, run_guest, GuestRun, Machine, VM_CMDLINE};
use crate::{insnprof, kernels, kmod};

pub const USAGE: &str =
    "usage: cargo xtask vm-bench [--kernel 6.1|6.12] [--secs N] [--icount] [--dev sim|pci|virtio|all] [--sender same|guest|card] [--gen-ns N] [--tables memory,xdp,xdp_drop,xdp_tx,moderation,xsk] [--sizes 1518,1000,500,250,64] [--iommu] [--profile]\n       cargo xtask vm-bench --report DIR... (a --profile run's directories again, target/vm/profile/<dev>)";

/// The frame sizes the sweeps measure unless `--sizes` says otherwise (the seed's).
const SIZES: [u16; 5] = [1518, 1000, 500, 250, 64];

/// The tables a boot can measure, in the order it measures them (`--tables` picks some).
const TABLES: [&str; 6] = ["memory", "xdp", "xdp_drop", "xdp_tx", "moderation", "xsk"];

/// The device a boot measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dev {
    /// onic.ko in simulation mode.
    Sim,
    /// onic.ko on the QEMU card.
    Pci,
    /// virtio_net on two virtio-net-pci NICs (the peer).
    Virtio,
}

impl Dev {
    const ALL: [Dev; 3] = [Dev::Sim, Dev::Pci, Dev::Virtio];

    fn name(self) -> &'static str {
        match self {
            Dev::Sim => "sim",
            Dev::Pci => "pci",
            Dev::Virtio => "virtio",
        }
    }
}

/// Where the traffic comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sender {
    /// The device's other port, in the measured guest.
    Same,
    /// A second guest, cabled to the device's port 0.
    Guest,
    /// The QEMU card's traffic generator, into its port 0.
    Card,
}

/// The interval of the card's generator (`--sender card`), in ns of QEMU's virtual clock: under
/// icount, 20 000 guest instructions, about twice what the receiving guest spends on a 1518-byte
/// datagram, so the receiver keeps up. `os-linux/vm/bench.sh` writes it to the generator.
pub const CARD_INTERVAL_NS: u32 = 20_000;

/// `--gen-ns`'s range: from the generator's own floor (shorter intervals than the receiver
/// keeps up with measure it at saturation, where frames share interrupts and polls, and the
/// card drops what its rings cannot take) to one frame a millisecond.
const GEN_NS_MIN: u32 = onic_qemu_card::gen::MIN_INTERVAL_NS;
const GEN_NS_MAX: u32 = 1_000_000;

impl Sender {
    fn name(self) -> &'static str {
        match self {
            Sender::Same => "same",
            Sender::Guest => "guest",
            Sender::Card => "card",
        }
    }
}

/// The command line.
struct Opts {
    kernel: String,
    secs: u32,
    icount: bool,
    devs: Vec<Dev>,
    sender: Sender,
    /// The tables to measure, a subset of [`TABLES`].
    tables: Vec<&'static str>,
    /// The frame sizes of the UDP and XDP sweeps.
    sizes: Vec<u16>,
    /// The PCI card behind QEMU's Intel IOMMU in strict mode, as on a host with the IOMMU on.
    iommu: bool,
    /// Every window's instructions per function, counted by QEMU (`insnprof.rs`): where the
    /// instructions of a packet go.
    profile: bool,
    /// The card generator's interval (`--sender card`), ns of QEMU's virtual clock.
    gen_ns: u32,
}

/// The MAC addresses `os-linux/vm/bench.sh` finds the two guests' NICs by: the control cable's
/// (sender, receiver), and the data NICs' (the sender's, the receiver's when it is virtio).
const CTL_MACS: [&str; 2] = ["52:54:00:c0:00:01", "52:54:00:c0:00:02"];
const DATA_MACS: [&str; 2] = ["52:54:00:5e:00:01", "52:54:00:5e:00:02"];

/// The first host UDP port of the socket netdevs; each device's pair of guests takes four.
const CABLE_PORT_BASE: u16 = 17_400;

/// One figure the guest reported.
struct Figure {
    table: String,
    config: String,
    what: String,
    value: u64,
    unit: String,
}

/// Kernel modules the virtio peer needs, in load order (virtio's core uses virtio_ring's symbols) (Debian's 6.1 builds them all as modules,
/// its 6.12 builds the virtio core in).
const VIRTIO_MODULES: [&str; 8] = [
    "drivers/virtio/virtio_ring.ko",
    "drivers/virtio/virtio.ko",
    "drivers/virtio/virtio_pci_legacy_dev.ko",
    "drivers/virtio/virtio_pci_modern_dev.ko",
    "drivers/virtio/virtio_pci.ko",
    "net/core/failover.ko",
    "drivers/net/net_failover.ko",
    "drivers/net/virtio_net.ko",
];

fn parse_args(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        kernel: "6.1".to_string(),
        secs: 5,
        icount: false,
        devs: vec![Dev::Sim],
        sender: Sender::Same,
        tables: TABLES.to_vec(),
        sizes: SIZES.to_vec(),
        iommu: false,
        profile: false,
        gen_ns: CARD_INTERVAL_NS,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--kernel" => o.kernel = it.next().cloned().ok_or(USAGE)?,
            "--icount" => o.icount = true,
            "--secs" => {
                o.secs = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|s| (1..=60).contains(s))
                    .ok_or("--secs takes 1..=60")?;
            }
            "--dev" => {
                o.devs = match it.next().map(String::as_str) {
                    Some("all") => Dev::ALL.to_vec(),
                    Some(name) => vec![Dev::ALL
                        .into_iter()
                        .find(|d| d.name() == name)
                        .ok_or_else(|| format!("--dev {name:?}: sim, pci, virtio or all"))?],
                    None => return Err(USAGE.into()),
                }
            }
            "--sender" => {
                o.sender = match it.next().map(String::as_str) {
                    Some("same") => Sender::Same,
                    Some("guest") => Sender::Guest,
                    Some("card") => Sender::Card,
                    _ => return Err(format!("--sender takes same, guest or card\n{USAGE}")),
                }
            }
            "--tables" => o.tables = parse_tables(it.next().ok_or(USAGE)?)?,
            "--sizes" => o.sizes = parse_sizes(it.next().ok_or(USAGE)?)?,
            "--iommu" => o.iommu = true,
            "--profile" => o.profile = true,
            "--gen-ns" => {
                o.gen_ns = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|n| (GEN_NS_MIN..=GEN_NS_MAX).contains(n))
                    .ok_or(format!("--gen-ns takes {GEN_NS_MIN}..={GEN_NS_MAX}"))?;
            }
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    if o.sender == Sender::Guest {
        if o.devs.contains(&Dev::Sim) && o.devs.len() == 1 {
            return Err(
                "--sender guest: simulation mode's ports are inside the guest; use --dev pci or virtio"
                    .into(),
            );
        }
        o.devs.retain(|d| *d != Dev::Sim);
    }
    if o.gen_ns != CARD_INTERVAL_NS && o.sender != Sender::Card {
        return Err("--gen-ns: the interval of the card's generator, for --sender card only".into());
    }
    if o.sender == Sender::Card {
        if o.devs == [Dev::Sim] {
            return Err(
                "--sender card: the traffic generator is the QEMU card's; use it with --dev pci or virtio"
                    .into(),
            );
        }
        o.devs.retain(|d| *d != Dev::Sim);
    }
    Ok(o)
}

/// `--sizes`: comma-separated frame sizes, each an Ethernet frame without FCS that carries a UDP
/// datagram with at least one byte (the guest subtracts 46 header bytes) and fits the MTU.
fn parse_sizes(list: &str) -> Result<Vec<u16>, String> {
    list.split(',')
        .map(|s| {
            s.parse::<u16>()
                .ok()
                .filter(|n| (64..=1518).contains(n))
                .ok_or_else(|| format!("--sizes: {s:?} is not a frame size in 64..=1518"))
        })
        .collect()
}

/// `--tables`: a comma-separated subset of [`TABLES`], kept in [`TABLES`]' order.
fn parse_tables(list: &str) -> Result<Vec<&'static str>, String> {
    let asked: Vec<&str> = list.split(',').collect();
    if let Some(bad) = asked.iter().find(|t| !TABLES.contains(t)) {
        return Err(format!("--tables: {bad:?} is not one of {}", TABLES.join(",")));
    }
    Ok(TABLES.into_iter().filter(|t| asked.contains(t)).collect())
}

fn figures(console: &[String]) -> Vec<Figure> {
    console
        .iter()
        .filter_map(|l| {
            let mut w = l.trim().strip_prefix("BENCH ")?.split_whitespace();
            Some(Figure {
                table: w.next()?.into(),
                config: w.next()?.into(),
                what: w.next()?.into(),
                value: w.next()?.parse().ok()?,
                unit: w.next()?.into(),
            })
        })
        .collect()
}

/// One markdown table: a row per measured quantity, a column per configuration (in the order
/// the guests ran them), each with its ratio to the first configuration of its device.
fn table(figs: &[&Figure]) -> String {
    let mut configs: Vec<&str> = Vec::new();
    let mut rows: Vec<(&str, &str)> = Vec::new();
    let mut v: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for f in figs {
        if !configs.contains(&f.config.as_str()) {
            configs.push(&f.config);
        }
        if !rows.iter().any(|(w, _)| *w == f.what) {
            rows.push((&f.what, &f.unit));
        }
        v.insert((&f.what, &f.config), f.value);
    }
    let mut out = format!("| figure | unit | {} |\n", configs.join(" | "));
    out.push_str(&format!("| --- | --- |{}\n", " --- |".repeat(configs.len())));
    // A configuration's ratio is to the first configuration of its device ("dev:config").
    let device = |c: &str| c.split(':').next().unwrap_or("").to_string();
    let first_of = |c: &str| configs.iter().copied().find(|f| device(f) == device(c));
    for (what, unit) in rows {
        let cells: Vec<String> = configs
            .iter()
            .map(|c| {
                let first = first_of(c).unwrap_or(c);
                let base = v.get(&(what, first)).copied().unwrap_or(0);
                match v.get(&(what, c)) {
                    Some(&x) if first != *c && base > 0 => format!("{x} ({:.2}×)", x as f64 / base as f64),
                    Some(&x) => x.to_string(),
                    None => "-".into(),
                }
            })
            .collect();
        out.push_str(&format!("| {what} | {unit} | {} |\n", cells.join(" | ")));
    }
    out
}

/// One end of a QEMU socket netdev `id` over the host's loopback: this end listens on `local`
/// and sends to `remote`.
fn cable(id: &str, local: u16, remote: u16) -> [String; 2] {
    [
        "-netdev".to_string(),
        format!("socket,id={id},udp=127.0.0.1:{remote},localaddr=127.0.0.1:{local}"),
    ]
}

/// A virtio-net-pci NIC on the netdev `id` with the address `mac`.
fn virtio_nic(id: &str, mac: &str) -> [String; 2] {
    [
        "-device".to_string(),
        format!("virtio-net-pci,netdev={id},mac={mac}"),
    ]
}

/// The machine `dev` runs on; with a sender guest, its port 0 and a control NIC are cabled to
/// the sender's, on the host ports from `ports`.
fn machine(dev: Dev, o: &Opts, ports: u16, plugin: Option<&Path>) -> Result<Machine, String> {
    let guest = o.sender == Sender::Guest;
    let mut m = match dev {
        Dev::Sim => Machine::debian(),
        Dev::Pci => pci_card_machine(
            &crate::qemucard::build()?,
            "console-bench-pci.log",
            guest.then_some("data"),
        ),
        Dev::Virtio if guest => {
            let mut m = Machine::debian();
            m.args.extend(virtio_nic("data", DATA_MACS[1]));
            m
        }
        // The card for its traffic generator only (no driver binds it): its port 0 and the
        // virtio NIC on one QEMU hub, so the generator's frames leave the card for the NIC.
        Dev::Virtio if o.sender == Sender::Card => {
            let mut m = pci_card_machine(
                &crate::qemucard::build()?,
                "console-bench-virtio.log",
                Some("gen"),
            );
            for id in ["gen", "data"] {
                m.args
                    .extend(["-netdev".to_string(), format!("hubport,id={id},hubid=0")]);
            }
            m.args.extend(virtio_nic("data", DATA_MACS[1]));
            m
        }
        Dev::Virtio => {
            let mut m = Machine::debian();
            for p in 0..2 {
                m.args.extend([
                    "-netdev".to_string(),
                    format!("hubport,id=p{p},hubid=0"),
                    "-device".to_string(),
                    format!("virtio-net-pci,netdev=p{p}"),
                ]);
            }
            m
        }
    };
    if guest {
        m.args.extend(cable("data", ports, ports + 2));
        m.args.extend(cable("ctl", ports + 1, ports + 3));
        m.args.extend(virtio_nic("ctl", CTL_MACS[1]));
    }
    if dev != Dev::Pci {
        m.log = format!("console-bench-{}.log", dev.name());
    } else if o.iommu {
        m.args
            .extend(["-device", "intel-iommu,intremap=on"].map(String::from));
    }
    if o.icount {
        m.cpus = 1;
        m.args.extend(["-icount", "shift=0,sleep=off"].map(String::from));
    }
    if let Some(plugin) = plugin {
        m.args.extend(insnprof::qemu_args(plugin, &profile_dir(dev))?);
    }
    Ok(m)
}

/// Where `--profile` keeps a device's counts and debug console.
fn profile_dir(dev: Dev) -> PathBuf {
    kmod::vm_root().join("profile").join(dev.name())
}

/// The sender guest of the receiver on `ports` (one vCPU, no icount): a virtio NIC on each of
/// the receiver's two cables.
fn sender_machine(dev: Dev, ports: u16) -> Machine {
    let mut m = Machine::debian();
    m.cpus = 1;
    m.log = format!("console-bench-{}-sender.log", dev.name());
    m.args.extend(cable("data", ports + 2, ports));
    m.args.extend(virtio_nic("data", DATA_MACS[0]));
    m.args.extend(cable("ctl", ports + 3, ports + 1));
    m.args.extend(virtio_nic("ctl", CTL_MACS[0]));
    m
}

/// Builds the module and the one initramfs every device's boot uses.
fn image(r: &kmod::Resolved) -> Result<PathBuf, String> {
    let obj = kmod::build_rust_object()?;
    let xdp = build_xdp()?;
    let ko = kmod::build_module(r, &obj)?;
    let mut extra = vec![(
        kernels::image_module(r, "net/core/pktgen.ko")?,
        "lib/modules/pktgen.ko".to_string(),
    )];
    for rel in VIRTIO_MODULES {
        let name = Path::new(rel).file_name().and_then(|n| n.to_str()).unwrap_or(rel);
        match kernels::image_module(r, rel) {
            Ok(m) => extra.push((m, format!("lib/modules/{name}"))),
            // The virtio core is built in on some kernels (6.12); the driver never is.
            Err(e) if !rel.ends_with("net_failover.ko") && !rel.ends_with("virtio_net.ko") => {
                println!("vm-bench: {rel} not a module of Linux {} ({e}); built in", r.abi);
            }
            Err(e) => return Err(e),
        }
    }
    let extra: Vec<(PathBuf, &str)> = extra.iter().map(|(p, d)| (p.clone(), d.as_str())).collect();
    initramfs(r, &ko, &xdp, &root().join("os-linux/vm/bench.sh"), &extra)
}

/// One guest to boot: the device it measures, whether it is the sender, its machine and its
/// kernel command line.
struct Boot {
    dev: Dev,
    sender: bool,
    machine: Machine,
    append: String,
}

/// The boots of each device: its measured guest, and its sender guest if it has one.
fn boots(o: &Opts) -> Result<Vec<Vec<Boot>>, String> {
    let plugin = if o.profile {
        Some(insnprof::build_plugin(&kmod::vm_root())?)
    } else {
        None
    };
    let mut sets = Vec::new();
    for (i, &d) in o.devs.iter().enumerate() {
        let ports = CABLE_PORT_BASE + 4 * i as u16;
        let append = |role: &str| {
            let iommu = if o.iommu && d == Dev::Pci && role == "receiver" {
                " intel_iommu=on iommu.strict=1"
            } else {
                ""
            };
            format!(
                "{VM_CMDLINE} onic_bench_secs={} onic_bench_dev={} onic_bench_icount={} onic_bench_sender={} onic_bench_tables={} onic_bench_sizes={} onic_bench_profile={} onic_bench_gen_ns={} onic_bench_role={role}{iommu}",
                o.secs,
                d.name(),
                u8::from(o.icount),
                o.sender.name(),
                o.tables.join(","),
                o.sizes.iter().map(u16::to_string).collect::<Vec<_>>().join(","),
                u8::from(o.profile),
                o.gen_ns,
            )
        };
        let mut set = vec![Boot {
            dev: d,
            sender: false,
            machine: machine(d, o, ports, plugin.as_deref())?,
            append: append("receiver"),
        }];
        if o.sender == Sender::Guest {
            set.push(Boot {
                dev: d,
                sender: true,
                machine: sender_machine(d, ports),
                append: append("sender"),
            });
        }
        sets.push(set);
    }
    Ok(sets)
}

/// Runs `boots` side by side; the results in the same order.
fn run_side_by_side(r: &kmod::Resolved, img: &Path, boots: &[&Boot]) -> Vec<Result<GuestRun, String>> {
    std::thread::scope(|s| {
        let hs: Vec<_> = boots
            .iter()
            .map(|b| {
                s.spawn(move || {
                    let prefix = format!("[{}{}] ", b.dev.name(), if b.sender { " sender" } else { "" });
                    run_guest(
                        r,
                        &b.machine,
                        img,
                        Duration::from_secs(7200),
                        "tcg",
                        &b.append,
                        &prefix,
                    )
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a boot thread panicked".into())))
            .collect()
    })
}

/// `cargo xtask vm-bench`.
pub fn vm_bench(args: &[String]) -> Result<ExitCode, String> {
    if let Some(("--report", dirs)) = args.split_first().map(|(a, r)| (a.as_str(), r)) {
        for d in dirs {
            let dir = Path::new(d);
            let name = dir
                .file_name()
                .map_or(d.clone(), |n| n.to_string_lossy().into_owned());
            println!("{}", insnprof::report(&name, dir)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let o = parse_args(args)?;
    let k = *kernels::select(&o.kernel)?.first().ok_or("no kernel selected")?;
    kmod::ensure_host_packages()?;
    let r = kernels::fetch(k)?;
    let img = image(&r)?;
    let sets = boots(&o)?;
    // A device's guests always run together. Under icount the host's load does not enter the
    // guests' clocks, so every device's guests run side by side; otherwise one device at a time.
    let groups: Vec<Vec<&Boot>> = if o.icount {
        vec![sets.iter().flatten().collect()]
    } else {
        sets.iter().map(|s| s.iter().collect()).collect()
    };
    let mut figs = Vec::new();
    // A device whose guest failed is reported after the tables of those that finished.
    let mut failed = Vec::new();
    for group in groups {
        let runs = run_side_by_side(&r, &img, &group);
        for (b, run) in group.iter().zip(runs) {
            let run = match run {
                Ok(run) => run,
                Err(e) => {
                    failed.push(format!(
                        "{}{}: {e}",
                        b.dev.name(),
                        if b.sender { " sender" } else { "" }
                    ));
                    continue;
                }
            };
            if b.sender {
                continue;
            }
            if !run.console.iter().any(|l| l.trim() == "VM-BENCH DONE") {
                failed.push(format!(
                    "{}: the guest did not finish (QEMU status {:?})",
                    b.dev.name(),
                    run.status
                ));
                continue;
            }
            println!(
                "==== vm-bench {}: Linux {}, {} s per figure{}, sender {}, {:.0} s",
                b.dev.name(),
                r.abi,
                o.secs,
                if o.icount {
                    ", icount (instruction-exact)"
                } else {
                    ""
                },
                if o.sender == Sender::Card {
                    format!("card (a frame every {} ns of virtual time)", o.gen_ns)
                } else {
                    o.sender.name().to_string()
                },
                run.elapsed.as_secs_f64()
            );
            figs.extend(figures(&run.console).into_iter().map(|mut f| {
                f.config = format!("{}:{}", b.dev.name(), f.config);
                f
            }));
            if o.profile {
                match insnprof::report(b.dev.name(), &profile_dir(b.dev)) {
                    Ok(t) => println!("{t}"),
                    Err(e) => failed.push(format!("{} profile: {e}", b.dev.name())),
                }
            }
        }
    }
    print_tables(&figs);
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(format!("vm-bench: {}", failed.join("; ")))
    }
}

/// Every table, each device's configurations side by side.
fn print_tables(figs: &[Figure]) {
    let mut tables: Vec<&str> = Vec::new();
    for f in figs {
        if !tables.contains(&f.table.as_str()) {
            tables.push(&f.table);
        }
    }
    for t in tables {
        let in_table: Vec<&Figure> = figs.iter().filter(|f| f.table == t).collect();
        println!("\n{t}\n\n{}", table(&in_table));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_to_the_first_configuration_of_the_same_device() {
        let console: Vec<String> = [
            "BENCH memory sim:page_pool udp64 100 datagrams/s",
            "BENCH memory sim:page_per_packet udp64 50 datagrams/s",
            "BENCH memory virtio:virtio_net udp64 80 datagrams/s",
            "BENCH memory virtio:virtio_net udp64_insn 1000 insn/datagram",
            "noise BENCH x y z 1 u",
            "BENCH memory sim:page_pool udp64_insn not-a-number insn/datagram",
        ]
        .map(String::from)
        .to_vec();
        let figs = figures(&console);
        assert_eq!(figs.len(), 4);
        let t = table(&figs.iter().collect::<Vec<_>>());
        assert!(
            t.contains("| udp64 | datagrams/s | 100 | 50 (0.50×) | 80 |"),
            "{t}"
        );
        assert!(t.contains("| udp64_insn | insn/datagram | - | - | 1000 |"), "{t}");
    }

    #[test]
    fn devices_and_modes_are_parsed() {
        let o = parse_args(&["--icount".into(), "--dev".into(), "all".into()]).unwrap();
        assert!(o.icount);
        assert_eq!(o.devs, Dev::ALL);
        assert!(parse_args(&["--dev".into(), "e1000".into()]).is_err());
        assert!(parse_args(&["--secs".into(), "0".into()]).is_err());
        let o = parse_args(&["--dev".into(), "all".into(), "--sender".into(), "guest".into()]).unwrap();
        assert_eq!(o.devs, [Dev::Pci, Dev::Virtio]);
        assert!(parse_args(&["--sender".into(), "guest".into()]).is_err());
    }

    #[test]
    fn the_card_sender_feeds_the_card_or_the_virtio_peer() {
        let args =
            |dev: &str| -> Vec<String> { ["--dev", dev, "--sender", "card"].map(String::from).to_vec() };
        for (dev, devs) in [
            ("pci", [Dev::Pci].as_slice()),
            ("virtio", [Dev::Virtio].as_slice()),
            ("all", [Dev::Pci, Dev::Virtio].as_slice()),
        ] {
            let o = parse_args(&args(dev)).unwrap();
            assert_eq!((o.sender, o.devs.as_slice()), (Sender::Card, devs), "{dev}");
            assert_eq!(o.gen_ns, CARD_INTERVAL_NS);
        }
        let e = parse_args(&args("sim")).err().unwrap_or_default();
        assert!(e.contains("--dev pci or virtio"), "{e:?}");
        assert!(
            parse_args(&["--sender".into(), "card".into()]).is_err(),
            "sim by default"
        );
        assert!(parse_args(&["--sender".into(), "cards".into()]).is_err());
    }

    #[test]
    fn the_generator_interval_is_bounded_and_for_the_card_sender_only() {
        let with = |ns: &str| -> Result<Opts, String> {
            parse_args(&["--dev", "pci", "--sender", "card", "--gen-ns", ns].map(String::from))
        };
        assert_eq!(with("5000").unwrap().gen_ns, 5000);
        assert_eq!(with("1000").unwrap().gen_ns, GEN_NS_MIN);
        assert!(with("999").is_err());
        assert!(with("1000001").is_err());
        assert!(with("x").is_err());
        assert!(parse_args(&["--dev", "pci", "--gen-ns", "5000"].map(String::from)).is_err());
    }

    #[test]
    fn sizes_are_frame_sizes() {
        assert_eq!(parse_sizes("1518,64").unwrap(), vec![1518, 64]);
        assert!(parse_sizes("63").is_err());
        assert!(parse_sizes("1519").is_err());
        assert!(parse_sizes("64,,500").is_err());
    }

    #[test]
    fn tables_are_a_subset_in_the_boot_order() {
        assert_eq!(parse_args(&[]).unwrap().tables, TABLES);
        let o = parse_args(&["--tables".into(), "xdp_tx,memory".into()]).unwrap();
        assert_eq!(o.tables, ["memory", "xdp_tx"]);
        assert!(parse_args(&["--tables".into(), "memory,bogus".into()]).is_err());
    }

    #[test]
    fn the_two_guests_cables_meet() {
        let o = parse_args(&[
            "--icount".into(),
            "--dev".into(),
            "virtio".into(),
            "--sender".into(),
            "guest".into(),
        ])
        .unwrap();
        let rx = machine(Dev::Virtio, &o, 100, None).unwrap();
        let tx = sender_machine(Dev::Virtio, 100);
        let netdevs = |m: &Machine| -> Vec<String> {
            m.args
                .iter()
                .filter(|a| a.starts_with("socket,"))
                .cloned()
                .collect()
        };
        // Each end sends to the port the other listens on.
        assert_eq!(
            netdevs(&rx),
            [
                "socket,id=data,udp=127.0.0.1:102,localaddr=127.0.0.1:100",
                "socket,id=ctl,udp=127.0.0.1:103,localaddr=127.0.0.1:101"
            ]
        );
        assert_eq!(
            netdevs(&tx),
            [
                "socket,id=data,udp=127.0.0.1:100,localaddr=127.0.0.1:102",
                "socket,id=ctl,udp=127.0.0.1:101,localaddr=127.0.0.1:103"
            ]
        );
        assert_eq!((rx.cpus, tx.cpus), (1, 1));
        assert!(rx.args.iter().any(|a| a == "shift=0,sleep=off"));
        assert!(!tx.args.iter().any(|a| a == "shift=0,sleep=off"));
    }
}
