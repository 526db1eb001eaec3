//! `onic run --xdp-obj FILE --kernel-verify`: the host kernel's verdict on the same program, beside
//! the engine's. The object is opened with the host's libbpf through `onic-libbpf` (`libbpf.so.1`,
//! opened at run time, so that nothing links against it) and only the chosen program is loaded
//! into the running kernel: libbpf creates the maps, resolves CO-RE relocations, and the verifier
//! decides. The program is unloaded again at once; nothing is attached.
//!
//! Where that cannot be done (no libbpf, or `bpf()` not permitted: no root, a container without
//! `CAP_BPF`, `kernel.unprivileged_bpf_disabled`), it says so, and the engine's own static check
//! of what the verifier refuses (`onic_bpf::verify`, always on) is what stands.

use onic_libbpf::{last_lines, Error, Lib, LoadOptions, PrintLevel, VerifierLog};

/// Lines of the log printed.
const LOG_LINES: usize = 20;

/// The kernel's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The verifier accepted the program; its statistics line.
    Accepted(String),
    /// Refused: the errno and the log's last lines.
    Refused(String),
    /// Not asked, and why.
    NotAsked(String),
}

/// Asks the host kernel about function `func` of object `path`: loaded as XDP when `as_xdp` or
/// when libbpf does not know its section, maps declared without `max_entries` given
/// `unsized_entries` (as the engine gives them), pinning cleared.
#[must_use]
pub fn verify(path: &std::path::Path, func: &str, as_xdp: bool, unsized_entries: u32) -> Verdict {
    let lib = match Lib::open() {
        Ok(lib) => lib,
        Err(e) => return Verdict::NotAsked(e.to_string()),
    };
    if let Err(e) = lib.probe() {
        return Verdict::NotAsked(e.to_string());
    }
    let opts = LoadOptions {
        func,
        as_xdp,
        tail_calls: false,
        inner_maps: false,
        unsized_entries,
        log: VerifierLog::Stats,
    };
    let verdict = match lib.load(path, &opts) {
        Ok(loaded) => {
            let stats = loaded
                .verifier_log
                .lines()
                .rev()
                .find(|l| l.starts_with("processed"))
                .unwrap_or("");
            Verdict::Accepted(stats.trim().to_string())
        }
        // Refused before the verifier ran: libbpf's warnings are the reasons.
        Err(Error::Refused(r)) => Verdict::Refused(format!(
            "errno {} ({})\n{}",
            r.errno,
            std::io::Error::from_raw_os_error(r.errno),
            indented(&r.reasons(PrintLevel::Warn))
        )),
        Err(e @ Error::Open(..)) => Verdict::Refused(e.to_string()),
        Err(e) => Verdict::NotAsked(e.to_string()),
    };
    verdict
}

/// The last [`LOG_LINES`] non-empty lines of `text`, each indented, with a count of those left
/// out.
fn indented(text: &str) -> String {
    let last = last_lines(text, LOG_LINES);
    let mut out = String::new();
    if last.before > 0 {
        out.push_str(&format!("  ... {} lines before\n", last.before));
    }
    for l in &last.lines {
        out.push_str("  ");
        out.push_str(l);
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// Prints the verdict, in the words `onic run` uses.
pub fn print(v: &Verdict) {
    match v {
        Verdict::Accepted(stats) => outln!("kernel verifier (host kernel, through libbpf): accepted; {stats}"),
        Verdict::Refused(why) => outln!("kernel verifier (host kernel, through libbpf): REFUSED: {why}"),
        Verdict::NotAsked(why) => outln!(
            "kernel verifier: not asked: {why}; the engine's static check of what the verifier refuses stands in"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_s_last_lines_are_indented_with_a_count_of_the_rest() {
        let log: String = (0..25).map(|i| format!("line {i}\n\n")).collect();
        let text = indented(&log);
        assert!(text.starts_with("  ... 5 lines before\n  line 5\n"), "{text}");
        assert!(text.ends_with("  line 24"), "{text}");
        assert_eq!(indented("only\n"), "  only");
    }
}
