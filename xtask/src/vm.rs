//! `cargo xtask vm-test`: the kernel module in Debian's kernels under QEMU (TCG).
//!
//! For each kernel: Debian's headers and image (see `kmod.rs`), onic.ko built and checked against
//! them, the XDP programs of `os-linux/xdp/` compiled with clang, an initramfs (busybox, `ip`,
//! `ethtool` and their libraries, the module, the XDP objects, the expected `ethtool -S` names,
//! `os-linux/vm/init.sh` as `/init`); then every kernel boots at once, side by side, each with a
//! timeout (prepare and judge stay per kernel). The guest's script reports
//! through isa-debug-exit: QEMU status 33 is pass, anything else (35 = a check failed, 0 = the
//! kernel panicked, a timeout) fails. The whole console, kernel log included, is printed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::kmod::{self, Resolved};
use crate::{root, run, run_sh};

pub const USAGE: &str =
    "usage: cargo xtask vm-test [--kernel 6.1|6.12|all] [--timeout SECONDS] [--expect-fail]";

/// QEMU status for the guest's "every check passed" (0x10 written to isa-debug-exit).
const STATUS_PASS: i32 = 33;
const DEFAULT_TIMEOUT_S: u64 = 900;

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
const GUEST_TOOLS: [&str; 7] = [
    "ip",
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
/// which ends QEMU without a verdict (the run fails).
pub const VM_CMDLINE: &str = "console=ttyS0 quiet panic=-1 rdinit=/init softlockup_panic=1 hung_task_panic=1 softlockup_all_cpu_backtrace=1";

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
    timeout: Duration,
    /// Boot with a deliberately failing check and expect the run to fail (status 35).
    expect_fail: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        kernel: "all".into(),
        timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
        expect_fail: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--kernel" => o.kernel = it.next().cloned().ok_or(USAGE)?,
            "--expect-fail" => o.expect_fail = true,
            "--timeout" => {
                let s = it.next().and_then(|s| s.parse::<u64>().ok()).ok_or(USAGE)?;
                o.timeout = Duration::from_secs(s);
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
    let mut c = Command::new("gcc");
    c.args(["-O2", "-Wall", "-Werror", "-static", "-o"])
        .arg(out.join(HASH_LOADER))
        .arg(src.join(format!("{HASH_LOADER}.c")))
        .args(["-lbpf", "-lelf", "-lz"]);
    run(&format!("gcc -static {HASH_LOADER}.c (libbpf)"), c)?;
    let mut c = Command::new("gcc");
    c.args(["-O2", "-Wall", "-Werror", "-static", "-o"])
        .arg(out.join(REPLAY_TOOL))
        .arg(root().join(format!("os-linux/vm/{REPLAY_TOOL}.c")))
        .args(["-lbpf", "-lelf", "-lz"]);
    run(&format!("gcc -static {REPLAY_TOOL}.c (libbpf)"), c)?;
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

/// Boots one kernel with the initramfs and `append` as its command line, echoing the console
/// (each line after `prefix`); the console is also written to `console.log` of the kernel's
/// directory.
pub fn run_guest(
    r: &Resolved,
    initrd: &Path,
    timeout: Duration,
    accel: &str,
    append: &str,
    prefix: &str,
) -> Result<GuestRun, String> {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args([
        "-accel",
        accel,
        "-m",
        "1G",
        "-smp",
        "2",
        "-display",
        "none",
        "-no-reboot",
        "-nic",
        "none",
    ])
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
    println!(
        "{prefix}==> boot Linux {} under qemu-system-x86_64 (TCG, timeout {} s)",
        r.abi,
        timeout.as_secs()
    );
    println!("{prefix}---- console ({}) ----", r.kernel.name);
    let (status, console, elapsed) = crate::qemu::run_echoing(&mut cmd, timeout, prefix)?;
    let _ = fs::write(r.dir.join("console.log"), console.join("\n") + "\n");
    println!("{prefix}---- end of console ({}) ----", r.kernel.name);
    Ok(GuestRun {
        status,
        console,
        elapsed,
    })
}

/// Boots one kernel with the VM test's initramfs; true when the guest's verdict is the expected
/// one.
fn boot(r: &Resolved, initrd: &Path, timeout: Duration, expect_fail: bool) -> Result<bool, String> {
    let mut append = format!("{VM_CMDLINE} {MEMORY_CHECKS} {}", r.kernel.vm_args);
    if expect_fail {
        append.push_str(" onic_vm_deliberate_fail");
    }
    let GuestRun {
        status,
        console,
        elapsed,
    } = run_guest(
        r,
        initrd,
        timeout,
        VM_TEST_ACCEL,
        append.trim(),
        &format!("[{}] ", r.kernel.name),
    )?;
    let secs = elapsed.as_secs_f64();
    let reported = console.iter().any(|l| l.trim() == "VM-TEST PASS");
    if expect_fail {
        let failed = status == Some(STATUS_FAIL)
            && console.iter().any(|l| l.trim() == "VM-TEST FAIL")
            && console.iter().any(|l| l.starts_with("FAIL: deliberate failure"));
        println!(
            "vm-test {} (deliberate failure): {} (QEMU status {status:?}) after {secs:.1} s",
            r.kernel.name,
            if failed {
                "PASS: the failing check failed the run"
            } else {
                "FAILED: a failing check did not fail the run"
            }
        );
        return Ok(failed);
    }
    match status {
        None => {
            println!(
                "vm-test {}: FAILED: no verdict within {} s, QEMU killed",
                r.kernel.name,
                timeout.as_secs()
            );
            Ok(false)
        }
        Some(STATUS_PASS) if reported => {
            println!(
                "vm-test {}: PASS (QEMU status {STATUS_PASS}) after {secs:.1} s",
                r.kernel.name
            );
            Ok(true)
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
                r.kernel.name
            );
            Ok(false)
        }
    }
}

/// `cargo xtask vm-test [--kernel ...]`.
pub fn vm_test(args: &[String]) -> Result<ExitCode, String> {
    let o = parse(args)?;
    let kernels = kmod::select(&o.kernel)?;
    let total = Instant::now();
    kmod::ensure_host_packages()?;
    let t = Instant::now();
    let obj = kmod::build_rust_object()?;
    println!("Rust object built in {:.1} s", t.elapsed().as_secs_f64());
    let xdp = build_xdp()?;
    let mut guests = Vec::new();
    for k in kernels {
        let t = Instant::now();
        let r = kmod::fetch(k)?;
        let ko = kmod::build_module(&r, &obj)?;
        let img = initramfs(&r, &ko, &xdp, &root().join("os-linux/vm/init.sh"), &[])?;
        println!(
            "kernel {}: module and initramfs ready in {:.1} s",
            k.name,
            t.elapsed().as_secs_f64()
        );
        guests.push((r, img));
    }
    // The guests boot side by side, each QEMU on one host thread (VM_TEST_ACCEL): on a machine
    // with a core per guest that halves the job's time. Their console lines carry the kernel's
    // name; each whole console is in target/vm/<kernel>/console.log.
    let verdicts: Vec<Result<bool, String>> = thread::scope(|scope| {
        let runs: Vec<_> = guests
            .iter()
            .map(|(r, img)| scope.spawn(|| boot(r, img, o.timeout, o.expect_fail)))
            .collect();
        runs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a guest's thread panicked".into()))
            })
            .collect()
    });
    let mut results = Vec::new();
    for ((r, _), ok) in guests.iter().zip(verdicts) {
        results.push((r.kernel.name, ok?));
    }
    println!(
        "==== vm-test summary ({:.1} s in all)",
        total.elapsed().as_secs_f64()
    );
    for (name, ok) in &results {
        let what = match (o.expect_fail, *ok) {
            (false, true) => "PASS",
            (false, false) => "FAIL",
            (true, true) => "PASS (the deliberately failing check failed the run)",
            (true, false) => "FAIL (the deliberately failing check did not fail the run)",
        };
        println!("  Linux {name}: {what}");
    }
    Ok(if results.iter().all(|(_, ok)| *ok) {
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
    let args = ["--kernel", "6.1", "--expect-fail"].map(String::from);
    if vm_test(&args)? != ExitCode::SUCCESS {
        return Err("vm-test: a deliberately failing check did not fail the run".into());
    }
    Ok(())
}
