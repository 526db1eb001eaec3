//! `cargo xtask`: project automation. `cargo xtask ci` is the project's whole test suite, the one
//! command the README and `.ci/run` name; `cargo xtask qemu` boots the bare-metal image;
//! `cargo xtask fuzz` runs the fuzz targets; `cargo xtask bench-peers` compares `onic bench` with
//! the DPDK peers side by side.

mod bpf;
mod bpfdiff;
mod debugkernel;
mod ffi;
mod fuzz;
mod insnprof;
mod kernels;
mod kmod;
mod panicpaths;
mod peers;
mod qemu;
mod qemucard;
mod vm;
mod vmbench;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

/// Targets the `no_std` crates must build for: the bare-metal image's, two other 64-bit
/// architectures, and a 32-bit one to catch `usize`/`u64` assumptions.
const NO_STD_TARGETS: [&str; 4] = [
    "x86_64-unknown-none",
    "riscv64gc-unknown-none-elf",
    "aarch64-unknown-none",
    "thumbv7em-none-eabihf",
];

/// The crates that must stay `no_std` (`onic-accel` falls back to the table path where its
/// multiplication backends do not exist).
const NO_STD_CRATES: [&str; 5] = ["onic-hal", "onic-core", "onic-embed", "onic-accel", "onic-bpf"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// Runs `script` with `sh -c` as step `step` (see [`run`]).
fn run_sh(step: &str, script: &str) -> Result<(), String> {
    let mut c = Command::new("sh");
    c.args(["-c", script]);
    run(step, c)
}

fn run(step: &str, mut cmd: Command) -> Result<(), String> {
    let start = Instant::now();
    println!("==> {step}");
    let status = cmd.status().map_err(|e| format!("{step}: cannot start: {e}"))?;
    println!(
        "<== {step}: {} in {:.1} s",
        if status.success() { "ok" } else { "FAILED" },
        start.elapsed().as_secs_f64()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("{step} failed ({status})"))
    }
}

fn step_fmt() -> Result<(), String> {
    let mut c = cargo();
    c.args(["fmt", "--all", "--check"]);
    run("cargo fmt --check", c)
}

fn step_clippy() -> Result<(), String> {
    let mut c = cargo();
    c.args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]);
    run("cargo clippy --workspace --all-targets -- -D warnings", c)?;
    // The bare-metal image is only a host stub in the workspace run; lint the real thing too.
    qemu::clippy()
}

fn step_test() -> Result<(), String> {
    let mut c = cargo();
    c.args(["test", "--workspace"]);
    run("cargo test --workspace", c)
}

fn step_no_std() -> Result<(), String> {
    for target in NO_STD_TARGETS {
        let mut c = cargo();
        c.args(["build", "--target", target]);
        for krate in NO_STD_CRATES {
            c.args(["-p", krate]);
        }
        run(
            &format!("no_std build of {} for {target}", NO_STD_CRATES.join(", ")),
            c,
        )?;
        check_mmio_barriers(target)?;
    }
    Ok(())
}

/// The MMIO barrier instructions `onic-hal` must contain per target (the table of
/// `hal/src/barrier.rs`; x86_64 has compiler barriers only).
const MMIO_BARRIERS: [(&str, [&str; 2]); 3] = [
    ("aarch64-unknown-none", ["dmb oshst", "dmb oshld"]),
    ("riscv64gc-unknown-none-elf", ["fence w,o", "fence i,ir"]),
    ("thumbv7em-none-eabihf", ["dmb sy", "dmb sy"]),
];

/// Disassembles the no_std build of `onic-hal` for `target` (`llvm-objdump`) and checks that the
/// barriers of its MMIO backend are the instructions its table names.
fn check_mmio_barriers(target: &str) -> Result<(), String> {
    let Some((_, want)) = MMIO_BARRIERS.iter().find(|(t, _)| *t == target) else {
        return Ok(());
    };
    let rlib = kmod::target_dir().join(target).join("debug/libonic_hal.rlib");
    let out = Command::new("llvm-objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&rlib)
        .output()
        .map_err(|e| format!("llvm-objdump (package llvm): {e}"))?;
    if !out.status.success() {
        return Err(format!("llvm-objdump -d {} failed", rlib.display()));
    }
    // "fence\tw, o" -> "fence w,o"
    let text = String::from_utf8_lossy(&out.stdout);
    let insns: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_once(':').map(|(_, i)| i))
        .map(|i| {
            i.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .replace(", ", ",")
        })
        .collect();
    for w in want {
        if !insns.iter().any(|i| i == w) {
            return Err(format!("{}: no `{w}` in the MMIO backend", rlib.display()));
        }
    }
    println!(
        "MMIO barriers of onic-hal for {target}: {} present",
        want.join(", ")
    );
    Ok(())
}

/// The toolchain Miri runs on (Miri is a nightly-only component).
const MIRI_TOOLCHAIN: &str = "nightly";

/// What Miri runs: the whole unit-test suites of the crates whose tests put host memory standing in
/// for DMA memory or a BAR under the code that uses it (the HAL's regions, pages and MMIO backend;
/// the core's queues and page pool against the model; the model's own memory blocks; the Linux
/// module's datapath and backends over its host OS stand-in), the module's integration tests, and
/// the model's DMA tests (its other integration tests drive whole workloads, too long for Miri).
/// There is no name filter: a test that must not run under Miri (a pure computation Miri would
/// spend minutes on, a wall-clock race) carries `#[cfg_attr(miri, ignore = "...")]` itself, so a
/// new test runs under Miri unless it opts out.
///
/// The runs are split into two lanes of about equal length (Miri interprets one thread at a time,
/// so one process keeps one core busy); the lanes run side by side, each with its own target
/// directory so that neither waits for the other's build lock.
const MIRI_LANES: [&[&[&str]]; 2] = [
    &[
        &["-p", "onic-core", "--lib"],
        &["-p", "onic-hal", "--features", "alloc", "--lib"],
        &["-p", "onic-sim", "--test", "dma"],
    ],
    &[&["-p", "onic-linux", "--tests"], &["-p", "onic-sim", "--lib"]],
];

/// `cargo +nightly ...` through the rustup proxy, with the variables the outer cargo exported for
/// its own toolchain removed (they would pin the pinned stable toolchain again).
fn cargo_nightly() -> Command {
    let mut c = Command::new("cargo");
    c.current_dir(root());
    for v in ["RUSTUP_TOOLCHAIN", "RUSTC", "RUSTDOC", "CARGO", "RUSTC_WRAPPER"] {
        c.env_remove(v);
    }
    c.arg(format!("+{MIRI_TOOLCHAIN}"));
    c
}

/// Makes sure the nightly toolchain is there (installs it with rustup if not).
fn ensure_nightly() -> Result<(), String> {
    let mut probe = cargo_nightly();
    probe.arg("--version");
    if probe.output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    let mut c = Command::new("rustup");
    c.args(["toolchain", "install", MIRI_TOOLCHAIN, "--profile", "minimal"]);
    run("rustup toolchain install nightly", c)
}

/// Makes sure the nightly toolchain with Miri is there (installs it with rustup if not) and its
/// sysroot is built.
fn ensure_miri() -> Result<(), String> {
    let mut probe = cargo_nightly();
    probe.args(["miri", "--version"]);
    let ok = probe.output().map(|o| o.status.success()).unwrap_or(false);
    if !ok {
        let mut c = Command::new("rustup");
        c.args([
            "toolchain",
            "install",
            MIRI_TOOLCHAIN,
            "--profile",
            "minimal",
            "--component",
            "miri,rust-src",
        ]);
        run("rustup toolchain install nightly --component miri,rust-src", c)?;
    }
    let mut c = cargo_nightly();
    c.args(["miri", "setup"]);
    run("cargo +nightly miri setup", c)
}

/// Runs one lane's Miri runs in order, in `target_dir`; stops at the first failure.
fn miri_lane(runs: &[&[&str]], target_dir: &Path) -> Result<(), String> {
    for args in runs {
        let mut c = cargo_nightly();
        c.env("CARGO_TARGET_DIR", target_dir);
        c.args(["miri", "test"]).args(*args);
        // Miri's defaults (Stacked Borrows, isolation on) are the strictest setting; MIRIFLAGS
        // from the caller pass through unchanged.
        run(&format!("cargo +nightly miri test {}", args.join(" ")), c)?;
    }
    Ok(())
}

fn step_miri() -> Result<(), String> {
    ensure_miri()?;
    let target = root().join("target");
    let [first, second] = MIRI_LANES;
    // The second lane runs on a thread of its own; its output interleaves with the first's, each
    // run framed by the `==>`/`<==` lines `run` prints.
    let second_dir = target.join("miri-lane-2");
    let other = std::thread::spawn(move || miri_lane(second, &second_dir));
    let a = miri_lane(first, &target);
    let b = other
        .join()
        .unwrap_or_else(|_| Err("the second Miri lane panicked".to_string()));
    a.and(b)
}

/// One CI job: its name and what it runs.
type Job = (&'static str, fn() -> Result<(), String>);

/// The logging backends: the facade must build with `defmt` (on a bare-metal target) and with
/// `log`; and the core without its `xdp` feature.
fn step_features() -> Result<(), String> {
    let mut c = cargo();
    c.args([
        "build",
        "-p",
        "onic-core",
        "--features",
        "defmt",
        "--target",
        "thumbv7em-none-eabihf",
    ]);
    run("onic-core with defmt logging (thumbv7em-none-eabihf)", c)?;
    let mut c = cargo();
    c.args(["build", "-p", "onic-core", "--features", "log"]);
    run("onic-core with log logging", c)?;
    // The core without XDP (`xdp` is a default feature): it must build for a bare-metal target
    // and pass its own tests.
    let mut c = cargo();
    c.args([
        "build",
        "-p",
        "onic-core",
        "--no-default-features",
        "--target",
        "thumbv7em-none-eabihf",
    ]);
    run("onic-core without XDP (thumbv7em-none-eabihf)", c)?;
    let mut c = cargo();
    c.args(["test", "-p", "onic-core", "--no-default-features"]);
    run("onic-core tests without XDP", c)
}

/// API docs of the library crates, with rustdoc warnings (broken links, bad HTML) as errors.
fn step_doc() -> Result<(), String> {
    let mut c = cargo();
    c.env("RUSTDOCFLAGS", "-D warnings");
    c.args([
        "doc",
        "--no-deps",
        "-p",
        "onic-hal",
        "-p",
        "onic-core",
        "-p",
        "onic-embed",
        "-p",
        "onic-accel",
        "-p",
        "onic-sim",
        "-p",
        "onic-testkit",
        "-p",
        "onic-bpf",
        "-p",
        "onic-libbpf",
        "-p",
        "onic-linux",
        "--features",
        "onic-hal/alloc",
    ]);
    run("cargo doc (-D warnings)", c)
}

/// The bare-metal image under QEMU: it must pass, a deliberately failing check must fail the run
/// (the exit status is real), a deliberate panic must be reported, the PVH entry must boot too,
/// and on the QEMU with the OpenNIC card as PCI functions (built once and cached by
/// `qemucard::build`, as the VM test's) the image must find the card and drive it.
fn step_qemu() -> Result<(), String> {
    let variants = [
        ("image self-test (multiboot)", qemu::Options::default()),
        (
            "image self-test with a deliberately failing check",
            qemu::Options {
                expect: qemu::Expect::Fail,
                ..qemu::Options::default()
            },
        ),
        (
            "image self-test with a deliberate panic",
            qemu::Options {
                expect: qemu::Expect::Panic,
                ..qemu::Options::default()
            },
        ),
        (
            "image self-test (PVH entry)",
            qemu::Options {
                pvh: true,
                ..qemu::Options::default()
            },
        ),
        (
            "image self-test on the QEMU PCI card (--card pci)",
            qemu::Options {
                pci_card: true,
                ..qemu::Options::default()
            },
        ),
    ];
    for (what, o) in variants {
        let start = Instant::now();
        println!("==> {what}");
        let code = qemu::qemu(&o)?;
        let ok = code == ExitCode::SUCCESS;
        println!(
            "<== {what}: {} in {:.1} s",
            if ok { "ok" } else { "FAILED" },
            start.elapsed().as_secs_f64()
        );
        if !ok {
            return Err(format!("{what} failed"));
        }
    }
    Ok(())
}

/// Clippy for the module build of onic-linux (feature `kernel` on the bare target): the
/// workspace run only sees its host library.
fn step_kmod_clippy() -> Result<(), String> {
    let mut c = cargo();
    c.args([
        "clippy",
        "-p",
        "onic-linux",
        "--features",
        "kernel",
        "--target",
        "x86_64-unknown-none",
        "--",
        "-D",
        "warnings",
    ]);
    run(
        "cargo clippy -p onic-linux --features kernel --target x86_64-unknown-none -- -D warnings",
        c,
    )
}

fn ci(only: Option<&str>) -> Result<(), String> {
    let steps: [Job; 12] = [
        ("fmt", step_fmt),
        ("clippy", step_clippy),
        ("test", step_test),
        ("no-std", step_no_std),
        ("features", step_features),
        ("doc", step_doc),
        ("qemu", step_qemu),
        ("miri", step_miri),
        // Every fuzz target for a bounded time (cargo-fuzz on nightly; crashes, leaks and census
        // mismatches fail it).
        ("fuzz", fuzz::ci_job),
        ("kmod-clippy", step_kmod_clippy),
        // The engine against the host kernel's BPF_PROG_TEST_RUN on Linux's and xdp-tools' XDP
        // programs (installs its packages as root; skipped where bpf() is not permitted).
        ("bpf-diff", bpfdiff::ci_job),
        // The kernel module in Debian's 6.1 and 6.12 under QEMU (installs its packages as root).
        ("vm-test", vm::ci_job),
    ];
    let mut ran = 0;
    for (name, f) in steps {
        if only.is_none_or(|o| o == name) {
            if let Err(e) = f() {
                // One line a CI log reader can take in at a glance: jobs, not individual tests.
                println!("jobs: {ran} passed, 1 failed ({name})");
                return Err(e);
            }
            ran += 1;
        }
    }
    if ran > 0 {
        println!("jobs: {ran} passed, 0 failed");
    }
    if ran == 0 {
        return Err(format!(
            "unknown ci job {:?}; jobs: fmt, clippy, test, no-std, features, doc, qemu, miri, fuzz, kmod-clippy, bpf-diff, vm-test",
            only.unwrap_or_default()
        ));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(args.get(1).map(String::as_str)),
        Some("kmod") => kernels::kmod(&args[1..]),
        // The Rust object's build runs the panic-path check.
        Some("panic-paths") => kmod::build_rust_object().map(|_| ()),
        Some("bpf-objects") => bpf::bpf_objects(&args[1..]),
        Some("bpf-diff") => bpfdiff::bpf_diff(&args[1..]),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("bench-peers") => peers::bench_peers(&args[1..]),
        Some("qemu-card") => qemucard::qemu_card(&args[1..]),
        Some("debug-kernel") => debugkernel::debug_kernel(&args[1..]),
        Some("vm-test") => match vm::vm_test(&args[1..]) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Some("vm-bench") => match vmbench::vm_bench(&args[1..]) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Some("qemu") => match qemu::parse(&args[1..]).and_then(|o| qemu::qemu(&o)) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        _ => Err(format!(
            "usage: cargo xtask ci [fmt|clippy|test|no-std|features|doc|qemu|miri|fuzz|kmod-clippy|bpf-diff|vm-test]\n       {}\n       \
             cargo xtask kmod [--kernel 6.1|6.12|all|debug]\n       cargo xtask panic-paths\n       cargo xtask qemu-card\n       cargo xtask debug-kernel\n       cargo xtask bpf-objects [--check]\n       cargo xtask bpf-diff [--update | --bare BUNDLE]\n       {}\n       {}\n       {}\n       {}",
            qemu::USAGE.trim_start_matches("usage: "),
            vm::USAGE.trim_start_matches("usage: "),
            vmbench::USAGE.trim_start_matches("usage: "),
            fuzz::USAGE.trim_start_matches("usage: "),
            peers::USAGE.trim_start_matches("usage: ")
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
