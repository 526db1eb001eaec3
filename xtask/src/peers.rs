//! `cargo xtask bench-peers`: the DPDK peers of `shared/bench-peers/` and the matching `onic
//! bench` figures in one run, interleaved, with one `figure ours peer ratio` line per comparison.
//!
//! What it does:
//!
//! 1. installs what the peers need when it is missing (Debian's DPDK 22.11 packages, `gcc`,
//!    `pkg-config`), waiting for the apt lock when another install holds it;
//! 2. builds `onic` (release), and a second `onic` with AVX2 and GFNI as compile-time target
//!    features when the CPU has both ([`CPU_FEATURES`]): DPDK's RSS peer is compiled with the
//!    GFNI and AVX-512 features of this CPU (its GFNI path exists only then), so the hash rows
//!    are also measured from a build given the features our backend uses, where one input's hash
//!    inlines into the caller's loop as DPDK's does; its figures carry the suffix
//!    [`CPU_SUFFIX`]. `onic-accel`'s tests run in that build first (bit-exact against the table
//!    path and the reference);
//! 3. copies `shared/bench-peers/` into `target/bench-peers/` (the scripts write beside
//!    themselves) and, `--runs` times, runs the peers (`run.sh` with `PEER_RUNS=1`) and then the
//!    matching `onic bench` figures, so that both sides see the same machine state;
//! 4. prints the median of the runs of each side and their ratio, with the goal of issue 14, and
//!    writes the same lines to `target/bench-peers/ratios.txt` (what `onic bench --plot
//!    DIR --peers FILE` draws).
//!
//! The machine's load is reported by `run.sh` (its `# load` lines are passed through) and by
//! `onic bench` (undisturbed repetitions per figure).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{cargo, root, run};

pub const USAGE: &str = "usage: cargo xtask bench-peers [--runs N] (default 3)";

/// Debian packages the peers need, and a command each provides.
const PACKAGES: [&str; 5] = ["dpdk", "dpdk-dev", "libdpdk-dev", "pkg-config", "gcc"];

/// One comparison: our figure, the peer's, and what the ratio should be.
struct Pair {
    name: &'static str,
    ours: &'static str,
    /// The peer figures to use, the first one the run produced.
    peers: &'static [&'static str],
    /// Units (ours and the peer's are the same).
    unit: &'static str,
    /// The goal for ours / peer.
    goal: Goal,
}

#[derive(Clone, Copy)]
enum Goal {
    AtLeast(f64),
    AtMost(f64),
}

/// The compile-time target features of the second build: the ones the affine backend's code is
/// compiled for (DPDK's RSS file gets `-mgfni -mavx512f ...`, the features its GFNI path uses).
const CPU_FEATURES: &str = "-C target-feature=+avx2,+gfni";

/// Appended to the names of the second build's figures, and of the comparisons made with them.
const CPU_SUFFIX: &str = "@avx2+gfni";

/// The comparisons of [`PAIRS`] made again with the second build's figures: the affine hash, a
/// frame and 13 input bytes, one at a time and in batches of 32.
const CPU_BUILD_PAIRS: [&str; 4] = [
    "shell_hash_affine_ipv4_udp_vs_toeplitz_ipv4_l4",
    "shell_hash_affine_batch32_ipv4_udp_vs_toeplitz_bulk32_ipv4_l4",
    "shell_hash_affine_input_vs_toeplitz_ipv4_l4",
    "shell_hash_affine_input_batch32_vs_toeplitz_bulk32_ipv4_l4",
];

/// The comparisons of issue 14, and the absolute goals against line rate.
const PAIRS: [Pair; 11] = [
    Pair {
        name: "rx_drop_64B_vs_testpmd_rxonly",
        ours: "rx_drop_driver_only",
        peers: &["testpmd_rxonly_null_64b"],
        unit: "Mpps",
        goal: Goal::AtLeast(2.4),
    },
    Pair {
        name: "pool_single_vs_mempool_c256_single",
        ours: "pool_alloc_recycle_single",
        peers: &["mempool_c256_single"],
        unit: "ns/page",
        goal: Goal::AtMost(0.5),
    },
    Pair {
        name: "pool_burst32_vs_mempool_c256_bulk32",
        ours: "pool_alloc_recycle_burst32",
        peers: &["mempool_c256_bulk32"],
        unit: "ns/page",
        goal: Goal::AtMost(1.0),
    },
    Pair {
        name: "shell_hash_ipv4_udp_vs_toeplitz_ipv4_l4",
        ours: "rss_shell_ipv4_udp_table",
        peers: &["rss_gfni_ipv4_l4", "rss_softrss_ipv4_l4"],
        unit: "ns/hash",
        goal: Goal::AtMost(1.0),
    },
    Pair {
        name: "shell_hash_clmul_ipv4_udp_vs_toeplitz_ipv4_l4",
        ours: "rss_shell_ipv4_udp_accel_clmul",
        peers: &["rss_gfni_ipv4_l4", "rss_softrss_ipv4_l4"],
        unit: "ns/hash",
        goal: Goal::AtMost(1.0),
    },
    Pair {
        name: "shell_hash_clmul_gfni_ipv4_udp_vs_toeplitz_ipv4_l4",
        ours: "rss_shell_ipv4_udp_accel_clmul+gfni",
        peers: &["rss_gfni_ipv4_l4", "rss_softrss_ipv4_l4"],
        unit: "ns/hash",
        goal: Goal::AtMost(1.0),
    },
    Pair {
        name: "shell_hash_affine_ipv4_udp_vs_toeplitz_ipv4_l4",
        ours: "rss_shell_ipv4_udp_accel_affine",
        peers: &["rss_gfni_ipv4_l4", "rss_softrss_ipv4_l4"],
        unit: "ns/hash",
        goal: Goal::AtMost(1.0),
    },
    Pair {
        name: "shell_hash_affine_batch32_ipv4_udp_vs_toeplitz_bulk32_ipv4_l4",
        ours: "rss_shell_ipv4_udp_accel_affine_batch32",
        peers: &["rss_gfni_bulk32_ipv4_l4"],
        unit: "ns/hash",
        goal: Goal::AtMost(1.0),
    },
    // The same work on both sides: 13 extracted input bytes against DPDK's 12-byte tuples, no
    // frame parsing, no hash type (the rows above hash whole frames).
    Pair {
        name: "shell_hash_affine_input_vs_toeplitz_ipv4_l4",
        ours: "rss_shell_input_accel_affine",
        peers: &["rss_gfni_ipv4_l4"],
        unit: "ns/hash",
        goal: Goal::AtMost(1.0),
    },
    Pair {
        name: "shell_hash_affine_input_batch32_vs_toeplitz_bulk32_ipv4_l4",
        ours: "rss_shell_input_accel_affine_batch32",
        peers: &["rss_gfni_bulk32_ipv4_l4"],
        unit: "ns/hash",
        goal: Goal::AtMost(1.0),
    },
    Pair {
        name: "toeplitz_ipv4_l4_vs_toeplitz_ipv4_l4",
        ours: "rss_toeplitz_ipv4_l4_table",
        peers: &["rss_gfni_ipv4_l4", "rss_softrss_ipv4_l4"],
        unit: "ns/hash",
        goal: Goal::AtMost(1.0),
    },
];

/// Absolute goals (no peer): ours against line rate. XDP_TX twice: with the program's MAC swap,
/// and untouched (the driver's share alone).
const LINE_RATE: [(&str, &str, f64, &str); 3] = [
    (
        "xdp_drop_64B_vs_100GbE_line_rate",
        "xdp_driver_only_drop_64B",
        148.8,
        "Mpps",
    ),
    (
        "xdp_tx_64B_vs_goal_100Mpps",
        "xdp_driver_only_tx_64B",
        100.0,
        "Mpps",
    ),
    (
        "xdp_tx_untouched_64B_vs_goal_100Mpps",
        "xdp_driver_only_tx_untouched_64B",
        100.0,
        "Mpps",
    ),
];

/// The `onic bench` invocations giving our side of the comparisons.
const OURS: [&[&str]; 4] = [
    &["bench", "rx", "--only", "rx_drop_driver_only"],
    &["bench", "pool", "--only", "pool_alloc_recycle"],
    &["bench", "rss"],
    &["bench", "xdp", "--only", "_64B"],
];

pub fn bench_peers(args: &[String]) -> Result<(), String> {
    let runs = match args {
        [] => 3,
        [flag, n] if flag == "--runs" => n.parse::<usize>().map_err(|_| USAGE.to_string())?.max(1),
        _ => return Err(USAGE.into()),
    };
    ensure_packages()?;
    let mut c = cargo();
    c.args(["build", "--release", "-p", "onic-cli"]);
    run("cargo build --release -p onic-cli", c)?;
    let cpu_build = cpu_build()?;
    let dir = copy_peers()?;
    let onic = root().join("target/release/onic");
    let mut peer: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut ours: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in 1..=runs {
        println!("==> run {r}/{runs}: DPDK peers");
        let out = capture(peer_command(&dir))?;
        collect(&out, &mut peer, true);
        println!("==> run {r}/{runs}: onic bench");
        for a in OURS {
            let mut c = Command::new(&onic);
            c.args(a);
            collect(&capture(c)?, &mut ours, false);
        }
        if let Some(cpu) = &cpu_build {
            let mut c = Command::new(cpu);
            c.args(["bench", "rss"]);
            let mut figures = BTreeMap::new();
            collect(&capture(c)?, &mut figures, false);
            for (name, v) in figures {
                ours.entry(format!("{name}{CPU_SUFFIX}")).or_default().extend(v);
            }
        }
    }
    let lines = report(&peer, &ours);
    std::fs::write(dir.join("ratios.txt"), lines.join("\n") + "\n")
        .map_err(|e| format!("write ratios.txt: {e}"))?;
    println!(
        "# figure ours peer ratio (medians of {runs} interleaved runs; written to {})",
        dir.join("ratios.txt").display()
    );
    for l in lines {
        println!("{l}");
    }
    Ok(())
}

/// Builds the second `onic` ([`CPU_FEATURES`], its own target directory) when the CPU has AVX2 and
/// GFNI; returns its path (`None` on any other CPU: only the generic build is measured).
fn cpu_build() -> Result<Option<PathBuf>, String> {
    #[cfg(target_arch = "x86_64")]
    let has = std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("gfni");
    #[cfg(not(target_arch = "x86_64"))]
    let has = false;
    if !has {
        println!("# the CPU lacks AVX2 or GFNI: no build with them as compile-time features");
        return Ok(None);
    }
    let dir = root().join("target/bench-peers-cpu");
    // `cargo WHAT --release -p PACKAGE` in the second build's directory, with its features.
    let step = |what: &str, package: &str| {
        let mut c = cargo();
        c.env("RUSTFLAGS", CPU_FEATURES);
        c.args([what, "--release", "-p", package, "--target-dir"])
            .arg(&dir);
        run(
            &format!("RUSTFLAGS='{CPU_FEATURES}' cargo {what} --release -p {package}"),
            c,
        )
    };
    step("build", "onic-cli")?;
    // The same build's hash code checked bit-exact against the table path and the reference
    // before it is timed (the crate's tests, compiled with the same features).
    step("test", "onic-accel")?;
    Ok(Some(dir.join("release/onic")))
}

/// `run.sh` for one process-level run of the peers, with a bounded wait for a quiet machine.
fn peer_command(dir: &Path) -> Command {
    let mut c = Command::new("bash");
    c.arg(dir.join("run.sh")).current_dir(dir);
    c.env("PEER_RUNS", "1");
    c.env("PEER_ONLY", "rss mempool testpmd");
    for (k, v) in [("PEER_QUIET_WAIT", "30"), ("PEER_STEP_RETRIES", "1")] {
        if std::env::var_os(k).is_none() {
            c.env(k, v);
        }
    }
    c
}

/// Runs `c`, passes its `#` commentary (machine, load) through, returns its standard output.
fn capture(mut c: Command) -> Result<String, String> {
    let out = c.output().map_err(|e| format!("{c:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{c:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    for l in text
        .lines()
        .filter(|l| l.starts_with("# load") || l.starts_with("# cpu") || l.contains("undisturbed"))
    {
        println!("  {l}");
    }
    Ok(text)
}

/// Adds every `name value unit` line of `text` to `into`; for the peers only ns/op and Mpps lines
/// (each micro-benchmark prints its figure twice, as ns/op and Mops/s).
fn collect(text: &str, into: &mut BTreeMap<String, Vec<f64>>, peer: bool) {
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let [name, value, unit] = f[..] else { continue };
        if peer && unit == "Mops/s" {
            continue;
        }
        if let Ok(v) = value.parse::<f64>() {
            into.entry(name.to_string()).or_default().push(v);
        }
    }
}

fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied()
}

/// `figure ours peer ratio` lines, each with the units, the peer used and the goal.
fn report(peer: &BTreeMap<String, Vec<f64>>, ours: &BTreeMap<String, Vec<f64>>) -> Vec<String> {
    let mut lines: Vec<String> = PAIRS.iter().map(|p| pair_line(p, "", peer, ours)).collect();
    let again = PAIRS.iter().filter(|p| CPU_BUILD_PAIRS.contains(&p.name));
    lines.extend(again.map(|p| pair_line(p, CPU_SUFFIX, peer, ours)));
    for (name, fig, goal, unit) in LINE_RATE {
        if let Some(o) = ours.get(fig).and_then(|v| median(v)) {
            let ratio = o / goal;
            lines.push(format!(
                "{name} {o:.3} {goal:.3} {ratio:.3} # {unit}; ours {fig} vs the goal itself: {}",
                if ratio >= 1.0 { "met" } else { "not met" }
            ));
        }
    }
    lines
}

/// The `figure ours peer ratio` line of `p`, with our figure of the build whose names end in
/// `build` ("" for the default build, [`CPU_SUFFIX`] for the second).
fn pair_line(
    p: &Pair,
    build: &str,
    peer: &BTreeMap<String, Vec<f64>>,
    ours: &BTreeMap<String, Vec<f64>>,
) -> String {
    let (name, fig) = (format!("{}{build}", p.name), format!("{}{build}", p.ours));
    let mine = ours.get(&fig).and_then(|v| median(v));
    let theirs = p
        .peers
        .iter()
        .find_map(|n| peer.get(*n).and_then(|v| median(v)).map(|m| (*n, m)));
    let (Some(o), Some((pn, t))) = (mine, theirs) else {
        return format!("# {name}: missing ({fig} or {})", p.peers.join("/"));
    };
    let ratio = o / t;
    let (met, goal) = match p.goal {
        Goal::AtLeast(g) => (ratio >= g, format!(">= {g}")),
        Goal::AtMost(g) => (ratio <= g, format!("<= {g}")),
    };
    format!(
        "{name} {o:.3} {t:.3} {ratio:.3} # {}; ours {fig} vs peer {pn}; goal ratio {goal}: {}",
        p.unit,
        if met { "met" } else { "not met" }
    )
}

/// `shared/bench-peers/` (beside the repository, where the workplace and CI put `shared/`),
/// copied fresh into `target/bench-peers/`.
fn copy_peers() -> Result<PathBuf, String> {
    let src = root().join("../shared/bench-peers");
    if !src.join("run.sh").exists() {
        return Err(format!(
            "{} not found (the project's shared/ folder)",
            src.display()
        ));
    }
    let dst = root().join("target/bench-peers");
    std::fs::create_dir_all(&dst).map_err(|e| format!("{}: {e}", dst.display()))?;
    let entries = std::fs::read_dir(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    for e in entries.flatten() {
        let p = e.path();
        if p.is_file() {
            let to = dst.join(e.file_name());
            std::fs::copy(&p, &to).map_err(|err| format!("copy {}: {err}", p.display()))?;
        }
    }
    Ok(dst)
}

/// Whether the peers' tools are installed.
fn have_tools() -> bool {
    let ok = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    ok("pkg-config", &["--exists", "libdpdk"])
        && ok("sh", &["-c", "command -v dpdk-testpmd && command -v gcc"])
}

/// Installs [`PACKAGES`] when the tools are missing. apt waits up to 15 minutes for the dpkg lock
/// (another install in progress); the package lists are refreshed first, retried while their lock
/// is held.
fn ensure_packages() -> Result<(), String> {
    if have_tools() {
        return Ok(());
    }
    let mut updated = false;
    for attempt in 0..30 {
        let mut c = Command::new("apt-get");
        c.args(["-o", "DPkg::Lock::Timeout=900", "update"]);
        if run("apt-get update", c).is_ok() {
            updated = true;
            break;
        }
        println!(
            "apt-get update failed (attempt {}), lock held? waiting 20 s",
            attempt + 1
        );
        std::thread::sleep(Duration::from_secs(20));
    }
    if !updated {
        return Err("apt-get update kept failing".into());
    }
    let mut c = Command::new("apt-get");
    c.env("DEBIAN_FRONTEND", "noninteractive");
    c.args([
        "-o",
        "DPkg::Lock::Timeout=900",
        "install",
        "-y",
        "--no-install-recommends",
    ]);
    c.args(PACKAGES);
    run(&format!("apt-get install {}", PACKAGES.join(" ")), c)?;
    if have_tools() {
        Ok(())
    } else {
        Err("DPDK installed but pkg-config, dpdk-testpmd or gcc still missing".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_builds_comparisons_are_pairs_and_read_its_figures() {
        for name in CPU_BUILD_PAIRS {
            let p = PAIRS.iter().find(|p| p.name == name).expect(name);
            let ours = BTreeMap::from([(format!("{}{CPU_SUFFIX}", p.ours), vec![1.0, 3.0, 2.0])]);
            let peer = BTreeMap::from([(p.peers[0].to_string(), vec![4.0])]);
            let line = pair_line(p, CPU_SUFFIX, &peer, &ours);
            assert!(
                line.starts_with(&format!("{name}{CPU_SUFFIX} 2.000 4.000 0.500 ")),
                "{line}"
            );
            // The default build's figure is not taken for the second build's.
            let line = pair_line(p, "", &peer, &ours);
            assert!(line.starts_with(&format!("# {name}: missing")), "{line}");
        }
    }
}
