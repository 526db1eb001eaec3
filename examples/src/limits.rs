//! Limits the `onic` tool checks before it starts: the ranges of its numeric options, the memory
//! a run needs against the memory the machine has, and a writable output directory.

use std::path::Path;

use onic_hal::PAGE_SIZE;

/// Host memory one page of the card model costs: a 4 KiB, 4 KiB-aligned heap block, which the
/// system allocator rounds up to about twice that (measured with `onic run` at several queue and
/// ring sizes: 8.1 to 8.3 KiB per RX ring slot).
pub const HOST_BYTES_PER_PAGE: u64 = 2 * PAGE_SIZE as u64;

/// Memory a run needs besides its pages (the program, the model's tables, the queues).
pub const BASE_BYTES: u64 = 64 << 20;

/// Pages a page pool may hold besides its ring: its cache and its recycle ring.
pub const POOL_EXTRA_PAGES: u64 =
    (onic_core::queue::pool::POOL_CACHE_DEFAULT + onic_core::queue::pool::RECYCLE_RING_CAPACITY) as u64;

/// Bytes as `12.3 GB` / `45.6 MB`.
#[must_use]
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else {
        format!("{:.1} MB", b / 1e6)
    }
}

/// Memory available to a new program (Linux: `MemAvailable` of /proc/meminfo); `None` where it
/// cannot be told.
#[must_use]
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// Refuses a run that needs more memory than `available` (when known). `what` names the options
/// and `detail` says how the figure was made.
///
/// # Errors
///
/// A message with both figures.
pub fn check_memory(what: &str, need: u64, detail: &str, available: Option<u64>) -> Result<(), String> {
    match available {
        Some(have) if need > have => Err(format!(
            "{what} needs about {} of memory ({detail}); this machine has {} available: use fewer queues, smaller rings or fewer frames",
            human(need),
            human(have)
        )),
        _ => Ok(()),
    }
}

/// Makes sure `dir` exists (created if missing) and a file can be created in it
/// ([`crate::file::writable_dir`]).
///
/// # Errors
///
/// `OPTION DIR: cannot create ...` or `OPTION DIR: no file can be created ...`.
pub fn writable_dir(dir: &Path, option: &str) -> Result<(), String> {
    crate::file::writable_dir(dir, option)
}

/// Checks that `value` (named `option`) lies in `lo..=hi`, with a message that says so.
///
/// # Errors
///
/// `OPTION VALUE: outside LO..=HI (WHY)`.
pub fn in_range<T: PartialOrd + std::fmt::Display>(
    option: &str,
    value: T,
    lo: T,
    hi: T,
    why: &str,
) -> Result<T, String> {
    if value >= lo && value <= hi {
        Ok(value)
    } else {
        Err(format!("{option} {value}: outside {lo}..={hi} ({why})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_refused_with_both_figures() {
        assert!(check_memory("x", 10, "d", Some(20)).is_ok());
        assert!(check_memory("x", 10, "d", None).is_ok());
        let e = check_memory(
            "--queues 64 --ring 16384",
            17_300_000_000,
            "pages",
            Some(8_000_000_000),
        )
        .unwrap_err();
        assert!(e.contains("17.3 GB") && e.contains("8.0 GB"), "{e}");
    }

    #[test]
    fn ranges_say_what_they_are() {
        assert_eq!(in_range("--tick-ns", 5u64, 1, 10, "why"), Ok(5));
        assert_eq!(
            in_range("--tick-ns", 0u64, 1, 10, "virtual nanoseconds per tick"),
            Err("--tick-ns 0: outside 1..=10 (virtual nanoseconds per tick)".into())
        );
    }

    #[test]
    fn this_machine_reports_its_memory() {
        if Path::new("/proc/meminfo").exists() {
            assert!(mem_available().is_some_and(|m| m > 0));
        }
    }

    #[test]
    fn an_unwritable_directory_is_found_before_anything_runs() {
        let base = std::env::temp_dir().join(format!("onic-limits-{}", std::process::id()));
        assert!(writable_dir(&base.join("out"), "--out-dir").is_ok());
        // A path below a regular file cannot be a directory.
        let file = base.join("file");
        std::fs::write(&file, b"x").unwrap();
        let e = writable_dir(&file.join("out"), "--out-dir").unwrap_err();
        assert!(e.starts_with("--out-dir "), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }
}
