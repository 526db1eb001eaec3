//! `cargo xtask qemu`: build the bare-metal image, boot it under QEMU (TCG) with a timeout, decode
//! its defmt log, and turn the image's verdict into this process's exit status.
//!
//! The image's exit convention (os-baremetal/README.md): it writes a code to isa-debug-exit, and
//! QEMU exits with `(code << 1) | 1`. 33 means every check passed; 35 a check failed; 37 a panic;
//! 39 a CPU exception; 41 no long mode. A QEMU status of 0 (e.g. a triple fault with -no-reboot)
//! and a timeout are failures too.
//!
//! `--card pci` boots the image on the QEMU that has the OpenNIC card as PCI functions
//! (`qemucard::build`, with the card's devices of `qemucard::CARD_DEVICES`), built with feature
//! `pci-card` so that its PCI-card group must find the card. QEMU's own log (stderr) is kept
//! then, and a line in which the card reports a model violation fails the run.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::{cargo, qemucard, root, run};

/// The image's target.
pub const TARGET: &str = "x86_64-unknown-none";
/// The image's package.
pub const PACKAGE: &str = "onic-baremetal";
/// QEMU status for "all checks passed".
pub const STATUS_PASS: i32 = 33;
/// QEMU status for "a check failed".
pub const STATUS_CHECKS_FAILED: i32 = 35;
/// QEMU status for "panic".
pub const STATUS_PANIC: i32 = 37;
/// Exit status of this command when QEMU had to be killed.
const STATUS_TIMEOUT: u8 = 124;
const DEFAULT_TIMEOUT_S: u64 = 120;

/// What the run is expected to show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Every check passes (status 33).
    Pass,
    /// The deliberately failing check is built in and fails the run (status 35).
    Fail,
    /// The deliberate panic is built in and the panic handler ends the run (status 37).
    Panic,
}

/// Options of one run.
#[derive(Clone, Debug)]
pub struct Options {
    pub expect: Expect,
    pub pvh: bool,
    pub timeout: Duration,
    pub build: bool,
    /// Boot on QEMU with the OpenNIC card as PCI functions (`--card pci`).
    pub pci_card: bool,
    /// Embed this BPF differential bundle and run it after the groups (feature `bpf-bundle`;
    /// `cargo xtask bpf-diff`).
    pub bpf_bundle: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            expect: Expect::Pass,
            pvh: false,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
            build: true,
            pci_card: false,
            bpf_bundle: None,
        }
    }
}

pub const USAGE: &str = "usage: cargo xtask qemu [--expect-fail | --expect-panic] [--boot multiboot|pvh] \
                         [--card none|pci] [--timeout SECONDS] [--no-build]";

/// Parses `cargo xtask qemu` arguments.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--expect-fail" => o.expect = Expect::Fail,
            "--expect-panic" => o.expect = Expect::Panic,
            "--no-build" => o.build = false,
            "--boot" => match it.next().map(String::as_str) {
                Some("pvh") => o.pvh = true,
                Some("multiboot") => o.pvh = false,
                other => return Err(format!("--boot takes multiboot or pvh, not {other:?}\n{USAGE}")),
            },
            "--card" => match it.next().map(String::as_str) {
                Some("pci") => o.pci_card = true,
                Some("none") => o.pci_card = false,
                other => return Err(format!("--card takes none or pci, not {other:?}\n{USAGE}")),
            },
            "--timeout" => {
                let secs = it
                    .next()
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or_else(|| format!("--timeout takes a number of seconds\n{USAGE}"))?;
                o.timeout = Duration::from_secs(secs);
            }
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    Ok(o)
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

fn features(o: &Options) -> Vec<&'static str> {
    let mut f = Vec::new();
    match o.expect {
        Expect::Pass => {}
        Expect::Fail => f.push("fail-check"),
        Expect::Panic => f.push("panic-check"),
    }
    if o.pvh {
        f.push("pvh-only");
    }
    if o.pci_card {
        f.push("pci-card");
    }
    if o.bpf_bundle.is_some() {
        f.push("bpf-bundle");
    }
    f
}

/// A name for this variant of the image (file names under target/qemu).
fn variant(o: &Options) -> String {
    let mut name = String::from("onic-baremetal");
    for f in features(o) {
        name.push('-');
        name.push_str(f);
    }
    name
}

/// Cargo, run inside os-baremetal/ so that its .cargo/config.toml (rustflags of the target,
/// DEFMT_LOG) applies.
fn image_cargo() -> Command {
    let mut c = cargo();
    c.current_dir(root().join("os-baremetal"));
    c
}

/// `cargo clippy` for the image's target (the workspace clippy job only sees its host stub).
pub fn clippy() -> Result<(), String> {
    let mut c = image_cargo();
    c.args([
        "clippy", "-p", PACKAGE, "--target", TARGET, "--", "-D", "warnings",
    ]);
    run(
        &format!("cargo clippy -p {PACKAGE} --target {TARGET} -- -D warnings"),
        c,
    )
}

fn build(o: &Options) -> Result<PathBuf, String> {
    let f = features(o);
    let mut c = image_cargo();
    c.args(["build", "--release", "-p", PACKAGE, "--target", TARGET]);
    if let Some(bundle) = &o.bpf_bundle {
        c.env("ONIC_BPF_BUNDLE", bundle);
    }
    if !f.is_empty() {
        c.args(["--features", &f.join(",")]);
    }
    run(
        &format!(
            "build {PACKAGE} for {TARGET} (release, features: {})",
            if f.is_empty() {
                "none".to_string()
            } else {
                f.join(",")
            }
        ),
        c,
    )?;
    let elf = target_dir().join(TARGET).join("release").join(PACKAGE);
    // Keep this variant's ELF next to its logs: defmt-print needs the very file that ran.
    let out = target_dir().join("qemu");
    fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let copy = out.join(format!("{}.elf", variant(o)));
    fs::copy(&elf, &copy).map_err(|e| format!("cannot copy {} to {}: {e}", elf.display(), copy.display()))?;
    Ok(copy)
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes sure QEMU (unless `stock_qemu` is false: the card's QEMU is built by `qemucard`) and
/// defmt-print are there; installs defmt-print with cargo if it is missing.
pub fn ensure_tools(stock_qemu: bool) -> Result<(), String> {
    if stock_qemu && !have("qemu-system-x86_64") {
        return Err(
            "qemu-system-x86_64 not found: install it (Debian: apt-get install --no-install-recommends \
                    qemu-system-x86); .ci/run does this on CI"
                .into(),
        );
    }
    if !have("defmt-print") {
        let mut c = cargo();
        c.args(["install", "defmt-print", "--locked"]);
        run(
            "cargo install defmt-print --locked (not found; about 2 minutes)",
            c,
        )?;
    }
    Ok(())
}

/// Starts `cmd` (QEMU with its console on a piped stdout), echoes every console line as it comes
/// (after `prefix`, which tells guests running side by side apart), and waits at most `timeout`.
/// Returns the exit code (`None`: killed at the timeout), the console lines (without the prefix)
/// and the wall time. Shared by the bare-metal image and the kernel VM test.
pub(crate) fn run_echoing(
    cmd: &mut Command,
    timeout: Duration,
    prefix: &str,
) -> Result<(Option<i32>, Vec<String>, Duration), String> {
    run_echoing_with(cmd, timeout, prefix, |_| {})
}

/// [`run_echoing`], calling `on_line` with every console line as it arrives (the VM test
/// answers the guest's requests to the host that way).
pub(crate) fn run_echoing_with(
    cmd: &mut Command,
    timeout: Duration,
    prefix: &str,
    on_line: impl Fn(&str) + Sync,
) -> Result<(Option<i32>, Vec<String>, Duration), String> {
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start qemu-system-x86_64: {e}"))?;
    let stdout = child.stdout.take().ok_or("no QEMU stdout")?;
    let (tx, rx) = mpsc::channel::<String>();
    let on_line = &on_line;
    let status = thread::scope(|scope| {
        scope.spawn(move || {
            for line in BufReader::new(stdout).split(b'\n').map_while(Result::ok) {
                let line = String::from_utf8_lossy(&line).trim_end_matches('\r').to_string();
                println!("{prefix}{line}");
                on_line(&line);
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        wait_with_timeout(&mut child, timeout)
    })?;
    let elapsed = start.elapsed();
    Ok((status, rx.try_iter().collect(), elapsed))
}

/// Waits for `child` until `timeout`; kills it after that. `Ok(None)` means it was killed.
fn wait_with_timeout(child: &mut std::process::Child, timeout: Duration) -> Result<Option<i32>, String> {
    let start = Instant::now();
    loop {
        match child.try_wait().map_err(|e| format!("waiting for QEMU: {e}"))? {
            Some(status) => return Ok(Some(status.code().unwrap_or(-1))),
            None if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(None);
            }
            None => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The QEMU to boot: the stock one, or with `--card pci` the one with the card (built or
/// reused by `qemucard::build`), given its firmware and the card's devices.
fn qemu_command(o: &Options) -> Result<Command, String> {
    if !o.pci_card {
        return Ok(Command::new("qemu-system-x86_64"));
    }
    let mut c = Command::new(qemucard::build()?);
    c.args(qemucard::firmware_args()).args(qemucard::device_args());
    Ok(c)
}

/// Builds (unless told not to), boots and judges the image.
pub fn qemu(o: &Options) -> Result<ExitCode, String> {
    ensure_tools(!o.pci_card)?;
    let elf = if o.build {
        build(o)?
    } else {
        target_dir().join("qemu").join(format!("{}.elf", variant(o)))
    };
    let out = target_dir().join("qemu");
    let defmt_bin = out.join(format!("{}.defmt", variant(o)));
    let console_log = out.join(format!("{}.console.log", variant(o)));
    let qemu_log = out.join(format!("{}.qemu.log", variant(o)));

    let mut cmd = qemu_command(o)?;
    cmd.args(["-machine", "q35", "-m", "128M", "-display", "none", "-no-reboot"])
        .args(["-serial", "stdio"])
        .arg("-serial")
        .arg(format!("file:{}", defmt_bin.display()))
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
        .arg("-kernel")
        .arg(&elf)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    if o.pci_card {
        // The card reports model violations on QEMU's stderr: kept, shown and judged.
        let log = fs::File::create(&qemu_log).map_err(|e| format!("{}: {e}", qemu_log.display()))?;
        cmd.stderr(log);
    } else {
        cmd.stderr(Stdio::inherit());
    }
    println!(
        "==> boot {} under {} (TCG, timeout {} s)",
        elf.display(),
        cmd.get_program().to_string_lossy(),
        o.timeout.as_secs()
    );
    println!("---- console (COM1) ----");
    let (status, console, elapsed) = run_echoing(&mut cmd, o.timeout, "")?;
    let _ = fs::write(&console_log, console.join("\n") + "\n");
    println!("---- end of console ----");

    println!("---- defmt log (COM2, decoded by defmt-print; DEFMT_LOG sets the level at build time) ----");
    decode_defmt(&elf, &defmt_bin);
    println!("---- end of defmt log ----");

    let log = if o.pci_card {
        let log = fs::read_to_string(&qemu_log).unwrap_or_default();
        println!(
            "---- QEMU log ({}) ----\n{log}---- end of QEMU log ----",
            qemu_log.display()
        );
        log
    } else {
        String::new()
    };
    Ok(judge(o, status, &console, &log, elapsed))
}

fn decode_defmt(elf: &Path, frames: &Path) {
    let input = match fs::File::open(frames) {
        Ok(f) => f,
        Err(e) => {
            println!("(no defmt stream: {e})");
            return;
        }
    };
    match Command::new("defmt-print")
        .arg("-e")
        .arg(elf)
        .stdin(input)
        .output()
    {
        Ok(out) => {
            print!("{}", String::from_utf8_lossy(&out.stdout));
            if !out.stderr.is_empty() {
                eprint!("{}", String::from_utf8_lossy(&out.stderr));
            }
        }
        Err(e) => println!("(cannot run defmt-print: {e})"),
    }
}

fn describe(status: i32) -> &'static str {
    match status {
        STATUS_PASS => "all checks passed",
        STATUS_CHECKS_FAILED => "a self-test check failed",
        STATUS_PANIC => "the image panicked",
        39 => "unexpected CPU exception",
        41 => "the CPU has no long mode",
        0 => "QEMU stopped without a verdict (triple fault / reset with -no-reboot?)",
        _ => "not an exit code of the image",
    }
}

/// Lines of QEMU's log in which the card reports a driver mistake (`onic-card: model
/// violation: ...`, qemu-card/src/model.rs).
fn card_violations(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("onic-card:") && l.contains("violation"))
        .collect()
}

fn judge(
    o: &Options,
    status: Option<i32>,
    console: &[String],
    qemu_log: &str,
    elapsed: Duration,
) -> ExitCode {
    let secs = elapsed.as_secs_f64();
    let Some(status) = status else {
        eprintln!(
            "xtask qemu: FAILED: no verdict within {} s; QEMU killed",
            o.timeout.as_secs()
        );
        return ExitCode::from(STATUS_TIMEOUT);
    };
    let saw = |needle: &str| console.iter().any(|l| l.contains(needle));
    println!("qemu: status {status} ({}) after {secs:.2} s", describe(status));
    let violations = card_violations(qemu_log);
    if !violations.is_empty() {
        eprintln!(
            "xtask qemu: FAILED: the card reported {} model violation line(s) in QEMU's log",
            violations.len()
        );
        return ExitCode::FAILURE;
    }
    // On the card, its group must have run and moved frames both ways.
    let on_card = !o.pci_card || (saw("PASS card-wire-pf0-to-pf1") && saw("PASS card-wire-pf1-to-pf0"));
    let (want, consistent) = match o.expect {
        Expect::Pass => (STATUS_PASS, saw("SELFTEST PASS") && on_card),
        Expect::Fail => (
            STATUS_CHECKS_FAILED,
            saw("FAIL deliberate-failure") && saw("SELFTEST FAIL"),
        ),
        Expect::Panic => (STATUS_PANIC, saw("PANIC at ") && saw("deliberate panic")),
    };
    if status == want && consistent {
        match o.expect {
            Expect::Pass => println!("xtask qemu: PASS: the image's verdict is pass (status {status})"),
            Expect::Fail => println!(
                "xtask qemu: PASS: the deliberately failing check made the image exit with status {status}, \
                 so a failing check really fails the run"
            ),
            Expect::Panic => println!(
                "xtask qemu: PASS: the deliberate panic was reported and the image exited with status {status}"
            ),
        }
        return ExitCode::SUCCESS;
    }
    if status == want {
        eprintln!(
            "xtask qemu: FAILED: status {status} as expected, but the console lacks the matching report"
        );
    } else {
        eprintln!(
            "xtask qemu: FAILED: status {status} ({}), expected {want} ({})",
            describe(status),
            describe(want)
        );
    }
    // The image's own verdict, as far as it fits an exit status.
    ExitCode::from(u8::try_from(status).ok().filter(|&s| s != 0).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_option_selects_the_pci_card_variant() {
        let o = parse(&["--card".into(), "pci".into()]).unwrap();
        assert!(o.pci_card);
        assert_eq!(features(&o), ["pci-card"]);
        assert_eq!(variant(&o), "onic-baremetal-pci-card");
        assert!(!parse(&[]).unwrap().pci_card);
        assert!(parse(&["--card".into(), "sim".into()]).is_err());
    }

    #[test]
    fn only_the_cards_violation_lines_count() {
        let log = "qemu-system-x86_64: warning: host doesn't support requested feature\n\
                   qemu-system-x86_64: onic-card: model violation: descriptor outside a mapped page\n\
                   qemu-system-x86_64: onic-card: further violations are counted, not logged\n";
        assert_eq!(card_violations(log).len(), 2);
        assert!(card_violations("qemu-system-x86_64: warning: nothing\n").is_empty());
    }
}
