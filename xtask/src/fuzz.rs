//! The fuzz targets of `fuzz/` (cargo-fuzz on nightly): the CI job runs every target for a bounded
//! time, and `cargo xtask fuzz TARGET --time N` runs one for longer.
//!
//! Targets are the files of `fuzz/fuzz_targets/` (each also a `[[bin]]` of `fuzz/Cargo.toml`), so
//! a new target takes part without a change here. Every run reads the committed seeds
//! (`fuzz/corpus/TARGET/`) and writes what it finds new into a working corpus under
//! `fuzz/target/` (never into the repository; the CI job uses its own, emptied first); a crash, a leak, a timeout or an assertion of the
//! target (page census, teardown) fails the run, and libFuzzer leaves the input in
//! `fuzz/artifacts/TARGET/`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{cargo_nightly, root, run};

/// Seconds each target runs in the CI job: all of them together stay within a few minutes.
pub const CI_SECONDS: u64 = 25;

/// A target whose single input takes longer than this is a finding (a loop that does not end).
const TIMEOUT_SECONDS: u64 = 20;

/// Memory a target may use (libFuzzer's RSS limit; also its default).
const RSS_LIMIT_MB: u64 = 2048;

pub const USAGE: &str = "usage: cargo xtask fuzz [TARGET|all] [--time SECONDS] [--fresh]";

fn fuzz_dir() -> PathBuf {
    root().join("fuzz")
}

/// The targets, from the files of `fuzz/fuzz_targets/`, sorted.
pub fn targets() -> Result<Vec<String>, String> {
    let dir = fuzz_dir().join("fuzz_targets");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            (p.extension()? == "rs").then(|| p.file_stem()?.to_str().map(str::to_string))?
        })
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(format!("{}: no fuzz targets", dir.display()));
    }
    Ok(names)
}

/// `cargo +nightly fuzz`, from the repository root, for the fuzz directory.
fn cargo_fuzz() -> Command {
    let mut c = cargo_nightly();
    c.arg("fuzz");
    c
}

/// Makes sure cargo-fuzz runs on the nightly toolchain (installs both if missing, as `.ci/run`
/// does).
fn ensure_cargo_fuzz() -> Result<(), String> {
    let mut probe = cargo_fuzz();
    probe.arg("--version");
    if probe.output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    crate::ensure_nightly()?;
    let mut c = Command::new("cargo");
    c.args(["install", "cargo-fuzz", "--locked"]);
    run("cargo install cargo-fuzz --locked", c)
}

/// What one run of one target did.
struct Outcome {
    executions: u64,
    seconds: f64,
    corpus: usize,
}

/// Reads libFuzzer's final statistics from its log.
fn executions(log: &str) -> u64 {
    log.lines()
        .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Where a run writes the inputs it finds: the CI job's own directory (emptied first), or the
/// working corpus kept across `cargo xtask fuzz` runs (emptied with `--fresh`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Work {
    Ci,
    Kept,
    Fresh,
}

/// Runs `target` for `seconds` with the working corpus `work` says.
fn run_target(target: &str, seconds: u64, work_kind: Work) -> Result<Outcome, String> {
    let dir = fuzz_dir();
    let sub = if work_kind == Work::Ci {
        "corpus-ci"
    } else {
        "corpus"
    };
    let work = dir.join("target").join(sub).join(target);
    let fresh = work_kind != Work::Kept;
    if fresh {
        let _ = fs::remove_dir_all(&work);
    }
    let seeds = dir.join("corpus").join(target);
    let logs = dir.join("target").join("logs");
    for d in [&work, &seeds, &logs] {
        fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let log_path = logs.join(format!("{target}.log"));
    let log = fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let mut c = cargo_fuzz();
    c.arg("run")
        .arg("--fuzz-dir")
        .arg(&dir)
        .arg(target)
        .arg(&work)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={TIMEOUT_SECONDS}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        .arg("-print_final_stats=1")
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log);
    let start = Instant::now();
    let status = c
        .status()
        .map_err(|e| format!("cargo fuzz run {target}: cannot start: {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    let text = fs::read_to_string(&log_path).unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        for l in tail.into_iter().rev() {
            println!("    {l}");
        }
        return Err(format!(
            "fuzz target {target} failed ({status}); log {}, input in {}",
            log_path.display(),
            dir.join("artifacts").join(target).display()
        ));
    }
    Ok(Outcome {
        executions: executions(&text),
        seconds,
        corpus: count(&work) + count(&seeds),
    })
}

fn count(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |d| d.flatten().count())
}

/// Builds every target, then runs each of `targets` for `seconds`, one at a time; prints one line
/// per target (executions, time, corpus entries).
fn run_all(targets: &[String], seconds: u64, work: Work) -> Result<(), String> {
    ensure_cargo_fuzz()?;
    let mut c = cargo_fuzz();
    c.arg("build").arg("--fuzz-dir").arg(fuzz_dir());
    run("cargo +nightly fuzz build", c)?;
    let mut total = 0;
    for t in targets {
        println!("==> fuzz {t} for {seconds} s");
        let o = run_target(t, seconds, work)?;
        total += o.executions;
        println!(
            "<== fuzz {t}: ok, {} executions in {:.1} s ({:.0}/s), no crash, no leak; corpus {} inputs",
            o.executions,
            o.seconds,
            o.executions as f64 / o.seconds.max(1e-3),
            o.corpus
        );
    }
    println!("fuzz: {} targets, {total} executions, 0 failures", targets.len());
    Ok(())
}

/// The CI job: every target for [`CI_SECONDS`], from the seeds alone (its own working corpora,
/// emptied first; the ones `cargo xtask fuzz` keeps are left alone).
pub fn ci_job() -> Result<(), String> {
    run_all(&targets()?, CI_SECONDS, Work::Ci)
}

/// `cargo xtask fuzz [TARGET|all] [--time N] [--fresh]`.
pub fn fuzz(args: &[String]) -> Result<(), String> {
    let mut target = None;
    let mut seconds = 60;
    let mut fresh = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--time" => {
                let v = it
                    .next()
                    .ok_or_else(|| format!("--time needs a value\n{USAGE}"))?;
                seconds = v
                    .parse()
                    .ok()
                    .filter(|&s| s > 0)
                    .ok_or_else(|| format!("--time {v}: a whole number of seconds above 0\n{USAGE}"))?;
            }
            "--fresh" => fresh = true,
            t if !t.starts_with('-') && target.is_none() => target = Some(t.to_string()),
            other => return Err(format!("unexpected argument {other:?}\n{USAGE}")),
        }
    }
    let all = targets()?;
    let chosen = match target.as_deref() {
        None | Some("all") => all,
        Some(t) if all.iter().any(|a| a == t) => vec![t.to_string()],
        Some(t) => return Err(format!("no fuzz target {t:?}; targets: {}", all.join(", "))),
    };
    run_all(&chosen, seconds, if fresh { Work::Fresh } else { Work::Kept })
}
