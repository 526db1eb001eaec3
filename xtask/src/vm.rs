//! `cargo xtask vm-test`: the kernel module in Debian's kernels under QEMU (TCG).
//!
//! For each kernel: Debian's headers and image (see `kmod.rs`), onic.ko built and checked against
//! them, the XDP programs of `os-linux/xdp/` compiled with clang, an initramfs (busybox, `ip`, `devlink`,
//! `ethtool` and their libraries, the module, the XDP objects, the static tools `onic_xdp_hash`,
//! `onic_replay`, `onic_xsk` (with `os-linux/vm/xsk.sh`), `onic_prof` and `onic_udp_sink`, the expected `ethtool -S` names,
//! `os-linux/vm/init.sh` as `/init`); then every kernel boots at once, side by side, each with a
//! timeout (prepare and judge stay per kernel). The guest's script reports
//! through isa-debug-exit: QEMU status 33 is pass, anything else (35 = a check failed, 0 = the
//! kernel panicked, a timeout) fails. The whole console, kernel log included, is printed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::kernels;
use crate::kmod::{self, Resolved};
use crate::{root, run, run_sh};

pub const USAGE: &str =
    "usage: cargo xtask vm-test [--kernel 6.1|6.12|all|debug] [--card sim|pci|all] [--timeout SECONDS] [--expect-fail]";

/// Which card the module drives in a VM test boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Card {
    /// The model inside the guest kernel (`sim=1`).
    Sim,
    /// The model as QEMU PCI functions (`qemu-card/`): probe, BARs, MSI-X, DMA through the
    /// vIOMMU (6.12) or bounced by swiotlb (6.1).
    Pci,
}

impl Card {
    fn name(self) -> &'static str {
        match self {
            Self::Sim => "sim",
            Self::Pci => "pci",
        }
    }
}

fn select_cards(which: &str) -> Result<Vec<Card>, String> {
    match which {
        "sim" => Ok(vec![Card::Sim]),
        "pci" => Ok(vec![Card::Pci]),
        "all" => Ok(vec![Card::Sim, Card::Pci]),
        other => Err(format!("unknown card {other:?}; one of sim, pci, all")),
    }
}

/// The PCI card's machine and devices (`qemucard::CARD_DEVICES`: PF0 and PF1 behind a PCIe root
/// port, the test-control function on the root complex).
fn pci_card_args(port0: Option<&str>) -> Vec<String> {
    let mut args = vec!["-machine".to_string(), "q35".to_string()];
    args.extend(crate::qemucard::device_args_with_port0(port0));
    for dir in crate::qemucard::FIRMWARE_DIRS {
        args.extend(["-L".to_string(), dir.to_string()]);
    }
    args
}

/// The QEMU built with the card (`qemu`), a q35 machine with the card's devices (port 0 on the
/// network backend `port0` if one is named, else the ports cabled to each other); `log` names
/// its console log.
pub fn pci_card_machine(qemu: &Path, log: &str, port0: Option<&str>) -> Machine {
    Machine {
        qemu: qemu.to_path_buf(),
        args: pci_card_args(port0),
        qmp: None,
        log: log.into(),
        cpus: 2,
    }
}

/// QEMU status for the guest's "every check passed" (0x10 written to isa-debug-exit).
const STATUS_PASS: i32 = 33;
/// The whole guest's deadline (each step inside has its own): a run takes 300-450 s on an idle
/// 2-core host with two guests side by side, and went past 900 s with the host's load at 12.
/// The AF_XDP checks (`xsk.sh`) added about 360 s to a 6.12 sim boot at a load of 7 (1053 s in
/// all), so the deadline leaves room above that.
const DEFAULT_TIMEOUT_S: u64 = 1500;

/// XDP programs: (object name, source, extra clang flags).
const XDP_PROGRAMS: [(&str, &str, &str); 5] = [
    ("xdp_drop", "xdp_drop.c", ""),
    ("xdp_pass", "xdp_pass.c", ""),
    ("xdp_tx", "xdp_tx.c", ""),
    ("xdp_redirect", "xdp_redirect.c", ""),
    ("xdp_hash", "xdp_hash.c", ""),
];

/// The loader of the device-bound `xdp_hash.o` (iproute2 cannot load those), linked statically
/// against libbpf so that the initramfs needs no libraries for it.
const HASH_LOADER: &str = "onic_xdp_hash";

/// Replays a capture through an XDP object attached to a netdev and records what came out, for
/// the comparison with `onic run --xdp-obj` (`os-linux/vm/README.md`).
const REPLAY_TOOL: &str = "onic_replay";

/// The VM test's client of the kernel's "netdev" netlink family (raw sockets, no library),
/// which `os-linux/vm/netlink.sh` runs.
const NL_TOOL: &str = "onic_nl";

/// The AF_XDP program of the VM test's XSK checks (`os-linux/vm/onic_xsk.c`, run by
/// `os-linux/vm/xsk.sh`), linked statically against libxdp (`xsk.h`) and libbpf.
const XSK_TOOL: &str = "onic_xsk";

/// The marker and symbol writer of `vm-bench --profile` (`os-linux/vm/onic_prof.c`).
const PROF_TOOL: &str = "onic_prof";

/// The UDP receiver of `vm-bench --sender card` (`os-linux/vm/onic_udp_sink.c`): reads every
/// datagram into user space.
const SINK_TOOL: &str = "onic_udp_sink";

/// The XSK checks, sourced by `init.sh` from this path inside the initramfs.
const XSK_SCRIPT: &str = "xsk.sh";

/// The QEMU card's test-control window for the guest's scripts, written by [`ctl_script`] and
/// sourced by `init.sh` and `bench.sh` from `/etc/onic`.
const CTL_SCRIPT: &str = "ctl.sh";

/// `ctl.sh`: the control window's register offsets (`CTL_<name>`, from
/// `onic_qemu_card::ctl::SHELL_NAMES`), its function's PCI ID, and `ctl_open` (find and enable
/// the function, `CTLBASE` from its BAR), `ctl_rd OFFSET` and `ctl_wr OFFSET VALUE` (devmem).
fn ctl_script() -> String {
    use std::fmt::Write as _;
    let mut s = String::from(
        "# Written by cargo xtask from qemu-card/src/ctl.rs: the QEMU card's test-control window.\n",
    );
    for (name, off) in onic_qemu_card::ctl::SHELL_NAMES {
        let _ = writeln!(s, "CTL_{name}={off:#04x}");
    }
    let _ = writeln!(
        s,
        "CTL_PCI_ID={:#06x}:{:#06x}",
        onic_hal::pci::VENDOR_XILINX,
        onic_qemu_card::CTL_DEVICE_ID
    );
    s.push_str(concat!(
        "# ctl_open: the window's PCI function (no driver binds it) enabled; CTLBASE its BAR.\n",
        "ctl_open() {\n",
        "\tfor d in /sys/bus/pci/devices/*; do\n",
        "\t\t[ \"$(cat $d/vendor):$(cat $d/device)\" = $CTL_PCI_ID ] && CTLDEV=$d\n",
        "\tdone\n",
        "\techo 1 >\"$CTLDEV/enable\"\n",
        "\tCTLBASE=$(awk 'NR == 1 { print $1 }' \"$CTLDEV/resource\")\n",
        "}\n",
        "ctl_rd() { printf '%d\\n' \"$(devmem $(printf '0x%x' $((CTLBASE + $1))) 32)\"; }\n",
        "ctl_wr() { devmem $(printf '0x%x' $((CTLBASE + $1))) 32 \"$2\"; }\n",
    ));
    s
}

/// The objects the VM replays the shared capture through (the prebuilt ones of `bpf/objects`,
/// which `onic run` loads too).
pub const REPLAY_OBJECTS: [&str; 8] = [
    "xdp_pass",
    "xdp_drop",
    "xdp_swap",
    "xdp_drop_udp",
    "xdp_tx",
    "xdp_redirect",
    "xdp_count",
    "xdp_features",
];

/// Host programs copied into the initramfs with their shared libraries.
const GUEST_TOOLS: [&str; 9] = [
    "ip",
    "devlink",
    "lspci",
    "ethtool",
    "iperf3",
    "ping",
    "xdp-loader",
    "xdp-filter",
    "xdp-bench",
];

/// Where libxdp looks for its BPF objects (the multi-program dispatcher, xdp-filter's programs):
/// copied into the initramfs whole.
const LIBXDP_OBJECTS: &str = "/usr/lib/x86_64-linux-gnu/bpf";

/// Kernel command line of every VM test boot: a soft lockup or a hung task panics the guest,
/// which ends QEMU without a verdict (the run fails). `no_timer_check`: the kernel's boot-time
/// check that the timer interrupt arrives through the IO-APIC waits a few emulated ticks, and
/// on a loaded host under TCG it can time out; with interrupt remapping on (the PCI card's
/// IOMMU) that is a panic before the test starts ("timer doesn't work through
/// Interrupt-remapped IO-APIC", seen once with the host's load at 12 on 2 cores).
pub const VM_CMDLINE: &str = "console=ttyS0 quiet panic=-1 rdinit=/init softlockup_panic=1 hung_task_panic=1 softlockup_all_cpu_backtrace=1 no_timer_check";

/// The kernel's own memory checks that Debian's kernels carry, on for the VM test (not for
/// `vm-bench`, whose figures they would slow): a write into memory after it went back to the
/// kernel, a double free or an overrun is reported in the kernel log, which `init.sh` checks.
/// `slub_debug=FZP`: slab sanity checks, red zones around objects, freed objects poisoned and the
/// poison checked when they are reused (`U`, the call sites of each allocation and free, is left
/// out: it halves the load tests' traffic once more). `page_poison=1` (CONFIG_PAGE_POISONING):
/// freed pages filled with a pattern that is checked when the page is allocated again. With them
/// a 6.12 run takes about 6 minutes instead of 4.5, and moves about a fifth of the traffic.
pub const MEMORY_CHECKS: &str = "slub_debug=FZP page_poison=1";

/// QEMU accelerator of the VM test: TCG with every vCPU on one host thread (round robin).
/// Multi-threaded TCG, QEMU's default, can let a vCPU go on running a translated block of kernel
/// code that another vCPU has just patched (static keys, static calls, the BPF dispatcher when a
/// program is attached): the vCPU then executes the patching's int3 after it is gone, and the
/// guest dies of an Oops in kernel code the driver never touched (seen as an `int3` Oops in
/// `bpf_dispatcher_xdp_func` under NAPI while `ip link set ... xdpdrv` attached a program). The
/// guest still has two CPUs, so the driver's process, softirq and other-CPU contexts still
/// interleave, at translated-block boundaries. `vm-bench` keeps the default for its figures.
pub const VM_TEST_ACCEL: &str = "tcg,thread=single";

struct Options {
    kernel: String,
    card: String,
    /// `--timeout`; without it [`DEFAULT_TIMEOUT_S`], or the debug kernel's own
    /// (`debugkernel::VM_TIMEOUT_S`).
    timeout: Option<Duration>,
    /// Boot with a deliberately failing check and expect the run to fail (status 35).
    expect_fail: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        kernel: "all".into(),
        card: "all".into(),
        timeout: None,
        expect_fail: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--kernel" => o.kernel = it.next().cloned().ok_or(USAGE)?,
            "--card" => o.card = it.next().cloned().ok_or(USAGE)?,
            "--expect-fail" => o.expect_fail = true,
            "--timeout" => {
                let s = it.next().and_then(|s| s.parse::<u64>().ok()).ok_or(USAGE)?;
                o.timeout = Some(Duration::from_secs(s));
            }
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    Ok(o)
}

fn mkdir(p: &Path) -> Result<(), String> {
    fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(d) = to.parent() {
        mkdir(d)?;
    }
    fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("copy {} -> {}: {e}", from.display(), to.display()))
}

/// Compiles the XDP programs (kernel independent) into `target/vm/xdp`.
pub fn build_xdp() -> Result<PathBuf, String> {
    let out = kmod::vm_root().join("xdp");
    mkdir(&out)?;
    let src = root().join("os-linux/xdp");
    let multiarch = String::from_utf8_lossy(
        &Command::new("gcc")
            .arg("-print-multiarch")
            .output()
            .map_err(|e| format!("gcc: {e}"))?
            .stdout,
    )
    .trim()
    .to_string();
    for (name, file, extra) in XDP_PROGRAMS {
        let mut c = Command::new("clang");
        c.args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
            .arg(format!("-I/usr/include/{multiarch}"));
        if !extra.is_empty() {
            c.arg(extra);
        }
        c.arg("-c")
            .arg(src.join(file))
            .arg("-o")
            .arg(out.join(format!("{name}.o")));
        run(&format!("clang -target bpf {file} -> {name}.o"), c)?;
    }
    // The guest tools, linked statically: the initramfs carries no libraries for them.
    let bpf = ["-lbpf", "-lelf", "-lz"].as_slice();
    let tools = [
        (src.join(format!("{HASH_LOADER}.c")), HASH_LOADER, bpf),
        (
            root().join(format!("os-linux/vm/{REPLAY_TOOL}.c")),
            REPLAY_TOOL,
            bpf,
        ),
        (
            root().join(format!("os-linux/vm/{NL_TOOL}.c")),
            NL_TOOL,
            [].as_slice(),
        ),
        (
            root().join(format!("os-linux/vm/{XSK_TOOL}.c")),
            XSK_TOOL,
            ["-lxdp", "-lbpf", "-lelf", "-lz", "-lzstd"].as_slice(),
        ),
        (
            root().join(format!("os-linux/vm/{PROF_TOOL}.c")),
            PROF_TOOL,
            [].as_slice(),
        ),
        (
            root().join(format!("os-linux/vm/{SINK_TOOL}.c")),
            SINK_TOOL,
            [].as_slice(),
        ),
    ];
    for (source, name, libs) in tools {
        let mut c = Command::new("gcc");
        c.args(["-O2", "-Wall", "-Werror", "-static", "-o"])
            .arg(out.join(name))
            .arg(source)
            .args(libs);
        run(&format!("gcc -static {name}.c {}", libs.join(" ")), c)?;
    }
    Ok(out)
}

/// Absolute paths of the shared libraries `bin` needs (ldd), the loader included.
fn libraries(bin: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd")
        .arg(bin)
        .output()
        .map_err(|e| format!("ldd {}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

fn which(prog: &str) -> Result<PathBuf, String> {
    for dir in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        let p = Path::new(dir).join(prog);
        if p.exists() {
            return Ok(p);
        }
    }
    Err(format!("{prog} not found on the host"))
}

/// The 71 names `ethtool -S` must list first, one per line, from the module's own table.
fn expected_stats() -> String {
    let mut s = String::new();
    let mut buf = [0u8; onic_linux::ethtool::ETH_GSTRING_LEN];
    for i in 0..onic_linux::ethtool::REFERENCE_STATS {
        onic_linux::ethtool::reference_name(i, &mut buf);
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        s.push_str(&String::from_utf8_lossy(&buf[..end]));
        s.push('\n');
    }
    s
}

/// Builds the initramfs for one kernel's module, with `init` as `/init` and `extra` files copied
/// to the given paths inside it.
pub fn initramfs(
    r: &Resolved,
    ko: &Path,
    xdp: &Path,
    init: &Path,
    extra: &[(PathBuf, &str)],
) -> Result<PathBuf, String> {
    let dir = r.dir.join("initramfs");
    let _ = fs::remove_dir_all(&dir);
    for d in [
        "bin",
        "sbin",
        "proc",
        "sys",
        "dev",
        "tmp",
        "run",
        "etc/onic",
        "lib/modules",
        "xdp",
    ] {
        mkdir(&dir.join(d))?;
    }
    copy(&which("busybox")?, &dir.join("bin/busybox"))?;
    for tool in GUEST_TOOLS {
        let bin = which(tool)?;
        copy(&bin, &dir.join(bin.strip_prefix("/").unwrap_or(&bin)))?;
        for lib in libraries(&bin)? {
            let real = fs::canonicalize(&lib).map_err(|e| format!("{}: {e}", lib.display()))?;
            copy(&real, &dir.join(lib.strip_prefix("/").unwrap_or(&lib)))?;
        }
    }
    for entry in fs::read_dir(LIBXDP_OBJECTS).map_err(|e| format!("{LIBXDP_OBJECTS}: {e}"))? {
        let p = entry.map_err(|e| format!("{LIBXDP_OBJECTS}: {e}"))?.path();
        copy(&p, &dir.join(p.strip_prefix("/").unwrap_or(&p)))?;
    }
    copy(ko, &dir.join("lib/modules/onic.ko"))?;
    for (name, _, _) in XDP_PROGRAMS {
        let f = format!("{name}.o");
        copy(&xdp.join(&f), &dir.join("xdp").join(&f))?;
    }
    copy(&xdp.join(HASH_LOADER), &dir.join("bin").join(HASH_LOADER))?;
    copy(&xdp.join(REPLAY_TOOL), &dir.join("bin").join(REPLAY_TOOL))?;
    copy(&xdp.join(NL_TOOL), &dir.join("bin").join(NL_TOOL))?;
    copy(
        &root().join("os-linux/vm/netlink.sh"),
        &dir.join("etc/onic/netlink.sh"),
    )?;
    copy(&xdp.join(XSK_TOOL), &dir.join("bin").join(XSK_TOOL))?;
    copy(&xdp.join(PROF_TOOL), &dir.join("bin").join(PROF_TOOL))?;
    copy(&xdp.join(SINK_TOOL), &dir.join("bin").join(SINK_TOOL))?;
    copy(
        &root().join("os-linux/vm").join(XSK_SCRIPT),
        &dir.join("etc/onic").join(XSK_SCRIPT),
    )?;
    fs::write(dir.join("etc/onic").join(CTL_SCRIPT), ctl_script())
        .map_err(|e| format!("{CTL_SCRIPT}: {e}"))?;
    for name in REPLAY_OBJECTS {
        let f = format!("{name}.o");
        copy(&root().join("bpf/objects").join(&f), &dir.join("replay").join(&f))?;
    }
    copy(
        &root().join("tests/data/xdp-shared.pcap"),
        &dir.join("replay/xdp-shared.pcap"),
    )?;
    let expected = root().join("os-linux/vm/expected");
    for entry in fs::read_dir(&expected).map_err(|e| format!("{}: {e}", expected.display()))? {
        let p = entry.map_err(|e| format!("{}: {e}", expected.display()))?.path();
        if let Some(n) = p.file_name() {
            copy(&p, &dir.join("replay/expected").join(n))?;
        }
    }
    fs::write(dir.join("etc/onic/stats71.txt"), expected_stats()).map_err(|e| format!("stats71: {e}"))?;
    for (from, to) in extra {
        copy(from, &dir.join(to))?;
    }
    let init_path = dir.join("init");
    copy(init, &init_path)?;
    let init = init_path;
    let mut c = Command::new("chmod");
    c.arg("755").arg(&init);
    run("chmod /init", c)?;
    let img = r.dir.join("initramfs.cpio.gz");
    let sh = format!(
        "cd '{}' && find . | cpio -o -H newc --quiet | gzip -1 > '{}'",
        dir.display(),
        img.display()
    );
    run_sh(&format!("initramfs for {}", r.kernel.name), &sh)?;
    Ok(img)
}

/// QEMU status for the guest's "a check failed" (0x11 written to isa-debug-exit).
const STATUS_FAIL: i32 = 35;

/// What a guest run left: QEMU's exit status (`None`: killed at the deadline), the console lines
/// and the time it took.
pub struct GuestRun {
    pub status: Option<i32>,
    pub console: Vec<String>,
    pub elapsed: Duration,
}

/// The emulator and devices of a guest: `qemu` with `args` (machine, devices), `-L` firmware
/// directories, a QMP socket when the guest may ask the host for monitor commands, and the name
/// its console log gets in the kernel's directory.
pub struct Machine {
    pub qemu: PathBuf,
    pub args: Vec<String>,
    pub qmp: Option<PathBuf>,
    pub log: String,
    /// vCPUs.
    pub cpus: u8,
}

impl Machine {
    /// Debian's `qemu-system-x86_64`, its default machine, no device added.
    pub fn debian() -> Self {
        Self {
            qemu: PathBuf::from("qemu-system-x86_64"),
            args: Vec::new(),
            qmp: None,
            log: "console.log".into(),
            cpus: 2,
        }
    }
}

/// Boots one kernel with the initramfs and `append` as its command line, echoing the console
/// (each line after `prefix`); the console is also written to the machine's log in the kernel's
/// directory.
pub fn run_guest(
    r: &Resolved,
    m: &Machine,
    initrd: &Path,
    timeout: Duration,
    accel: &str,
    append: &str,
    prefix: &str,
) -> Result<GuestRun, String> {
    let mut cmd = Command::new(&m.qemu);
    cmd.args([
        "-accel",
        accel,
        "-m",
        "1G",
        "-smp",
        &m.cpus.to_string(),
        "-display",
        "none",
        "-no-reboot",
        "-nic",
        "none",
    ])
    .args(&m.args)
    .args([
        "-serial",
        "stdio",
        "-device",
        "isa-debug-exit,iobase=0xf4,iosize=0x04",
    ])
    .arg("-kernel")
    .arg(&r.vmlinuz)
    .arg("-initrd")
    .arg(initrd)
    .args(["-append", append])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    if let Some(sock) = &m.qmp {
        let _ = fs::remove_file(sock);
        cmd.arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", sock.display()));
    }
    println!(
        "{prefix}==> boot Linux {} under {} (TCG, timeout {} s)",
        r.abi,
        m.qemu.display(),
        timeout.as_secs()
    );
    println!("{prefix}---- console ({}) ----", r.kernel.name);
    let qmp = m.qmp.clone();
    let (status, console, elapsed) = crate::qemu::run_echoing_with(&mut cmd, timeout, prefix, |line| {
        if let (Some(sock), Some(request)) = (&qmp, line.trim().strip_prefix(QMP_REQUEST)) {
            println!("{prefix}[host] QMP {request}: {}", qmp_command(sock, request));
        }
    })?;
    let _ = fs::write(r.dir.join(&m.log), console.join("\n") + "\n");
    println!("{prefix}---- end of console ({}) ----", r.kernel.name);
    Ok(GuestRun {
        status,
        console,
        elapsed,
    })
}

/// A console line starting with this asks the host for a monitor command: `device_del ID`
/// (the rest of the line). The guest prints it and then watches for the effect itself.
const QMP_REQUEST: &str = "onic-vm: qmp ";

/// Runs one request of the guest (`device_del ID` is the only one) on QEMU's QMP socket;
/// returns QMP's answer or what went wrong.
fn qmp_command(sock: &Path, request: &str) -> String {
    let mut words = request.split_whitespace();
    let command = match (words.next(), words.next(), words.next()) {
        (Some("device_del"), Some(id), None) if id.chars().all(|c| c.is_ascii_alphanumeric()) => {
            format!(r#"{{"execute":"device_del","arguments":{{"id":"{id}"}}}}"#)
        }
        _ => return format!("refused: not a request the VM test makes ({request:?})"),
    };
    qmp_exchange(sock, &command).unwrap_or_else(|e| format!("failed: {e}"))
}

fn qmp_exchange(sock: &Path, command: &str) -> Result<String, String> {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let stream = UnixStream::connect(sock).map_err(|e| format!("{}: {e}", sock.display()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let mut greeting = String::new();
    reader.read_line(&mut greeting).map_err(|e| e.to_string())?;
    let mut writer = stream;
    let mut answer = |send: &str| -> Result<String, String> {
        writeln!(writer, "{send}").map_err(|e| e.to_string())?;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("QMP closed the connection".into());
            }
            if line.contains("\"return\"") || line.contains("\"error\"") {
                return Ok(line.trim().to_string());
            }
        }
    };
    answer(r#"{"execute":"qmp_capabilities"}"#)?;
    answer(command)
}

/// The machine and kernel command line of a VM test boot of `r` on `card`.
fn machine_for(r: &Resolved, card: Card, qemu: Option<&Path>) -> (Machine, String) {
    let base = format!("{VM_CMDLINE} {MEMORY_CHECKS}");
    match (card, qemu) {
        (Card::Pci, Some(qemu)) => {
            let mut machine = pci_card_machine(qemu, "console-pci.log", None);
            if r.kernel.pci_iommu {
                machine
                    .args
                    .extend(["-device", "intel-iommu,intremap=on"].map(String::from));
            }
            machine.qmp = Some(r.dir.join("qmp-pci.sock"));
            (machine, format!("{base} onic_card=pci {}", r.kernel.pci_args))
        }
        _ => (Machine::debian(), format!("{base} {}", r.kernel.vm_args)),
    }
}

/// What one guest's run came to: whether its verdict is the expected one, and the console lines
/// that say why not (its failed checks with their detail, or its last lines when it gave no
/// verdict), so the run's summary at the end of a long log shows them.
struct Verdict {
    ok: bool,
    why: Vec<String>,
}

/// At most this many console lines per guest are repeated in the summary.
const SUMMARY_LINES: usize = 60;

impl Verdict {
    fn pass() -> Self {
        Verdict {
            ok: true,
            why: Vec::new(),
        }
    }

    /// A failed run: its `FAIL:` lines and the `    |` detail under each, or, when the guest
    /// printed no failed check, its console's last lines.
    fn fail(console: &[String]) -> Self {
        let mut why = Vec::new();
        let mut in_failure = false;
        for line in console {
            if line.starts_with("FAIL: ") {
                in_failure = true;
            } else if !line.starts_with("    |") {
                in_failure = false;
            }
            if in_failure {
                why.push(line.clone());
            }
        }
        if why.is_empty() {
            let skip = console.len().saturating_sub(20);
            why.extend(console[skip..].iter().cloned());
        }
        why.truncate(SUMMARY_LINES);
        Verdict { ok: false, why }
    }
}

/// Boots one kernel with the VM test's initramfs on `card`; says whether the guest's verdict is
/// the expected one.
fn boot(
    r: &Resolved,
    card: Card,
    qemu: Option<&Path>,
    initrd: &Path,
    timeout: Duration,
    expect_fail: bool,
) -> Result<Verdict, String> {
    let (machine, mut append) = machine_for(r, card, qemu);
    if expect_fail {
        append.push_str(" onic_vm_deliberate_fail");
    }
    let name = format!("{} {}", r.kernel.name, card.name());
    let GuestRun {
        status,
        console,
        elapsed,
    } = run_guest(
        r,
        &machine,
        initrd,
        timeout,
        VM_TEST_ACCEL,
        append.trim(),
        &format!("[{name}] "),
    )?;
    let secs = elapsed.as_secs_f64();
    let reported = console.iter().any(|l| l.trim() == "VM-TEST PASS");
    if expect_fail {
        let failed = status == Some(STATUS_FAIL)
            && console.iter().any(|l| l.trim() == "VM-TEST FAIL")
            && console.iter().any(|l| l.starts_with("FAIL: deliberate failure"));
        println!(
            "vm-test {} (deliberate failure): {} (QEMU status {status:?}) after {secs:.1} s",
            name,
            if failed {
                "PASS: the failing check failed the run"
            } else {
                "FAILED: a failing check did not fail the run"
            }
        );
        return Ok(if failed {
            Verdict::pass()
        } else {
            Verdict::fail(&console)
        });
    }
    match status {
        None => {
            println!(
                "vm-test {}: FAILED: no verdict within {} s, QEMU killed",
                name,
                timeout.as_secs()
            );
            Ok(Verdict::fail(&console))
        }
        Some(STATUS_PASS) if reported => {
            println!(
                "vm-test {}: PASS (QEMU status {STATUS_PASS}) after {secs:.1} s",
                name
            );
            Ok(Verdict::pass())
        }
        Some(s) => {
            let why = match s {
                0 => "the kernel stopped without a verdict (panic?)",
                35 => "a check failed",
                STATUS_PASS => "status 33 but no VM-TEST PASS line",
                _ => "unexpected status",
            };
            println!(
                "vm-test {}: FAILED: QEMU status {s} ({why}) after {secs:.1} s",
                name
            );
            Ok(Verdict::fail(&console))
        }
    }
}

/// `cargo xtask vm-test [--kernel ...] [--card ...]`.
pub fn vm_test(args: &[String]) -> Result<ExitCode, String> {
    let o = parse(args)?;
    let kernels = kernels::select(&o.kernel)?;
    let cards = select_cards(&o.card)?;
    let total = Instant::now();
    kmod::ensure_host_packages()?;
    let qemu = if cards.contains(&Card::Pci) {
        Some(crate::qemucard::build()?)
    } else {
        None
    };
    let t = Instant::now();
    let obj = kmod::build_rust_object()?;
    println!("Rust object built in {:.1} s", t.elapsed().as_secs_f64());
    let xdp = build_xdp()?;
    let mut guests = Vec::new();
    for k in kernels {
        let t = Instant::now();
        let r = kernels::fetch(k)?;
        let ko = kmod::build_module(&r, &obj)?;
        // pktgen drives the ndo_xdp_xmit load test (init.sh).
        let pktgen = kernels::image_module(&r, "net/core/pktgen.ko")?;
        let img = initramfs(
            &r,
            &ko,
            &xdp,
            &root().join("os-linux/vm/init.sh"),
            &[(pktgen, "lib/modules/pktgen.ko")],
        )?;
        println!(
            "kernel {}: module and initramfs ready in {:.1} s",
            k.name,
            t.elapsed().as_secs_f64()
        );
        guests.push((r, img));
    }
    // For each card, the kernels boot side by side, each QEMU on one host thread
    // (VM_TEST_ACCEL): on a machine with a core per guest that halves the job's time. Their
    // console lines carry the kernel's and the card's name; each whole console is in
    // target/vm/<kernel>/console.log (console-pci.log for the PCI card).
    let mut results = Vec::new();
    for &card in &cards {
        let verdicts: Vec<Result<Verdict, String>> = thread::scope(|scope| {
            let runs: Vec<_> = guests
                .iter()
                .map(|(r, img)| {
                    let q = qemu.as_deref();
                    let timeout = o.timeout.unwrap_or(Duration::from_secs(
                        if r.kernel.name == crate::debugkernel::DEBUG.name {
                            crate::debugkernel::VM_TIMEOUT_S
                        } else {
                            DEFAULT_TIMEOUT_S
                        },
                    ));
                    scope.spawn(move || boot(r, card, q, img, timeout, o.expect_fail))
                })
                .collect();
            runs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a guest's thread panicked".into()))
                })
                .collect()
        });
        for ((r, _), ok) in guests.iter().zip(verdicts) {
            results.push((format!("{} on the {} card", r.kernel.name, card.name()), ok?));
        }
    }
    println!(
        "==== vm-test summary ({:.1} s in all)",
        total.elapsed().as_secs_f64()
    );
    for (name, verdict) in &results {
        let what = match (o.expect_fail, verdict.ok) {
            (false, true) => "PASS",
            (false, false) => "FAIL",
            (true, true) => "PASS (the deliberately failing check failed the run)",
            (true, false) => "FAIL (the deliberately failing check did not fail the run)",
        };
        println!("  Linux {name}: {what}");
        for line in &verdict.why {
            println!("    {line}");
        }
    }
    Ok(if results.iter().all(|(_, v)| v.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `cargo xtask ci vm-test`: both kernels, then a deliberately failing check on 6.1 must fail
/// the run (the verdict path is real).
pub fn ci_job() -> Result<(), String> {
    if vm_test(&[])? != ExitCode::SUCCESS {
        return Err("vm-test failed".into());
    }
    let args = ["--kernel", "6.1", "--card", "sim", "--expect-fail"].map(String::from);
    if vm_test(&args)? != ExitCode::SUCCESS {
        return Err("vm-test: a deliberately failing check did not fail the run".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ctl_script;

    #[test]
    fn ctl_script_has_the_offsets_the_id_and_the_accessors() {
        let s = ctl_script();
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines.contains(&"CTL_MAGIC=0x00"));
        assert!(lines.contains(&"CTL_GEN_FRAMES=0x68"));
        assert!(lines.contains(&"CTL_FEC_ERRORS=0x44"));
        assert!(lines.contains(&"CTL_PCI_ID=0x10ee:0x0c7e"));
        for f in ["ctl_open() {", "ctl_rd() {", "ctl_wr() {"] {
            assert!(lines.iter().any(|l| l.starts_with(f)), "{f}");
        }
    }
}
