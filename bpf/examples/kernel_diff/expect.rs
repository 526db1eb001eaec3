//! The expectations file: every known difference between the kernel and the engine, one a line:
//!
//! ```text
//! PROGRAM KIND FRAMES REASON...
//! selftests/xdp_synproxy_kern:syncookie_xdp onic-refuses - helper bpf_tcp_raw_gen_syncookie_ipv4 (...)
//! ```
//!
//! KIND is `onic-refuses` (the kernel loads it, the engine does not), `kernel-refuses` (the
//! reverse), `verdict`, `bytes`, `maps` or `records` (ring buffer records; these four on FRAMES
//! frames, `-` for the two load kinds). Lines starting with `#` are comments. A difference seen
//! but not listed fails the run; so does a listed one not seen, or seen on another number of
//! frames, unless its REASON starts with [`HOST`]: a difference that comes from the host's
//! kernel, the reference, and not from the engine (a host kernel that refuses a helper that
//! Debian's kernels allow), so that a host without it does not see it.

use std::collections::BTreeMap;
use std::process::ExitCode;

use crate::Diff;

type Key = (String, String, String);

/// How the REASON of a difference that depends on the host's kernel starts.
const HOST: &str = "[host]";

fn key(d: &Diff) -> Key {
    let frames = if d.frames == 0 {
        "-".to_string()
    } else {
        d.frames.to_string()
    };
    (d.program.clone(), d.kind.to_string(), frames)
}

/// The file's entries: key, reason.
fn parse(text: &str) -> Result<BTreeMap<Key, String>, String> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut w = line.splitn(4, char::is_whitespace);
        let (Some(p), Some(k), Some(f), Some(reason)) = (w.next(), w.next(), w.next(), w.next()) else {
            return Err(format!("line {}: want PROGRAM KIND FRAMES REASON", n + 1));
        };
        out.insert((p.into(), k.into(), f.into()), reason.trim().to_string());
    }
    Ok(out)
}

/// Checks `diffs` against the file at `path` (or rewrites it with `update`).
pub fn check(path: &str, diffs: &[Diff], update: bool) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let known = parse(&text).map_err(|e| format!("{path}: {e}"))?;
    if update {
        return write(path, &text, &known, diffs);
    }
    let seen: BTreeMap<Key, &Diff> = diffs.iter().map(|d| (key(d), d)).collect();
    let new: Vec<&&Diff> = seen
        .iter()
        .filter(|(k, _)| !known.contains_key(*k))
        .map(|(_, d)| d)
        .collect();
    let gone: Vec<(&Key, &String)> = known
        .iter()
        .filter(|(k, r)| !seen.contains_key(*k) && !r.starts_with(HOST))
        .collect();
    println!(
        "differences: {} seen, {} expected, {} not expected, {} expected but not seen",
        seen.len(),
        known.len(),
        new.len(),
        gone.len()
    );
    for d in &new {
        let frames = if d.frames == 0 {
            String::new()
        } else {
            format!(" on {} frames", d.frames)
        };
        println!("NEW DIFFERENCE {} {}{frames}: {}", d.program, d.kind, d.detail);
    }
    for ((p, k, f), reason) in &gone {
        println!("EXPECTED BUT NOT SEEN {p} {k} {f} ({reason}): fixed? update {path}");
    }
    if new.is_empty() && gone.is_empty() {
        println!("bpf-diff: every difference is a known one");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("bpf-diff: FAILED (the differences above are not as {path} records them)");
        Ok(ExitCode::FAILURE)
    }
}

/// Rewrites the file: its leading comment, then the differences seen, with the reasons the file
/// gave the same program and kind before (`REASON?` for new ones).
fn write(path: &str, text: &str, known: &BTreeMap<Key, String>, diffs: &[Diff]) -> Result<ExitCode, String> {
    let mut out: String = text
        .lines()
        .take_while(|l| l.starts_with('#') || l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let mut sorted: Vec<&Diff> = diffs.iter().collect();
    sorted.sort_by_key(|d| key(d));
    for d in sorted {
        let (p, k, f) = key(d);
        let reason = known
            .iter()
            .find(|((kp, kk, _), _)| *kp == p && *kk == k)
            .map_or("REASON?", |(_, r)| r.as_str());
        out.push_str(&format!("{p} {k} {f} {reason}\n"));
    }
    // The host's differences stay listed where this host does not show them.
    let seen: Vec<Key> = diffs.iter().map(key).collect();
    for ((p, k, f), reason) in known {
        if reason.starts_with(HOST) && !seen.contains(&(p.clone(), k.clone(), f.clone())) {
            out.push_str(&format!("{p} {k} {f} {reason}\n"));
        }
    }
    std::fs::write(path, out).map_err(|e| format!("{path}: {e}"))?;
    println!("bpf-diff: wrote {} differences to {path}", diffs.len());
    Ok(ExitCode::SUCCESS)
}
