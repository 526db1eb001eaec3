//! What the run prints: one line per program, the reasons behind refusals, the summary table.

use crate::ProgResult;

/// Hex of at most 16 bytes of `b` from `at`, with an ellipsis when there is more.
fn hex(b: &[u8], at: usize) -> String {
    let s: String = b.iter().skip(at).take(16).map(|x| format!("{x:02x}")).collect();
    if b.len() > at + 16 {
        format!("{s}...")
    } else {
        s
    }
}

/// A map entry for a message (`none` when there is none).
pub fn entry(e: Option<&(Vec<u8>, Vec<u8>)>) -> String {
    e.map_or_else(|| "none".into(), |(k, v)| format!("{}={}", hex(k, 0), hex(v, 0)))
}

/// A ring buffer record for a message: its length and first bytes (`none` when there is none).
pub fn record(r: Option<&Vec<u8>>) -> String {
    r.map_or_else(|| "none".into(), |r| format!("{} bytes {}", r.len(), hex(r, 0)))
}

/// Where the kernel's and the engine's bytes after a run first differ.
pub fn bytes_diff(km: &[u8], kf: &[u8], om: &[u8], of: &[u8]) -> String {
    if km != om {
        return format!(
            "metadata: kernel {} bytes {}, onic {} bytes {}",
            km.len(),
            hex(km, 0),
            om.len(),
            hex(om, 0)
        );
    }
    let at = kf
        .iter()
        .zip(of)
        .position(|(a, b)| a != b)
        .unwrap_or(kf.len().min(of.len()));
    format!(
        "kernel {} bytes, onic {} bytes, first difference at {at}: kernel {}, onic {}",
        kf.len(),
        of.len(),
        hex(kf, at),
        hex(of, at)
    )
}

fn short(s: &str) -> String {
    let s = s.replace('\n', " ");
    if s.chars().count() > 150 {
        let mut t: String = s.chars().take(150).collect();
        t.push_str("...");
        t
    } else {
        s
    }
}

/// One line per program (and the reasons of refusals under it).
pub fn program_line(r: &ProgResult, took: std::time::Duration) {
    let side = |x: &Option<String>| if x.is_some() { "refuses" } else { "loads" };
    let cmp = if r.kernel.is_some() || r.onic.is_some() {
        "-".to_string()
    } else {
        format!(
            "{} frames, verdict/bytes/maps/records differ on {}/{}/{}/{}",
            r.compared, r.verdict, r.bytes, r.maps, r.records
        )
    };
    let slow = if took.as_secs_f64() >= 1.0 {
        format!(" ({:.1} s)", took.as_secs_f64())
    } else {
        String::new()
    };
    println!(
        "{:<58} kernel {:<7} onic {:<7} {cmp}{slow}",
        r.id,
        side(&r.kernel),
        side(&r.onic)
    );
    if let Some(k) = &r.kernel {
        println!("    kernel: {}", short(k));
    }
    if let Some(o) = &r.onic {
        println!("    onic:   {}", short(o));
    }
    if let Some((why, frames)) = &r.run_refused {
        let which = if frames.len() <= 3 {
            frames.join(", ")
        } else {
            format!("{} frames", frames.len())
        };
        println!("    the kernel's test run refuses {which}: {why}");
    }
}

/// The counts of the summary table.
#[derive(Default)]
pub struct Tally {
    /// Sources (objects) in the manifest.
    pub sources: usize,
    /// Sources that did not compile, with the reason.
    pub compile_failed: Vec<String>,
    /// Programs of other types in the objects (not compared).
    pub other: usize,
    programs: usize,
    kernel: usize,
    onic: usize,
    both: usize,
    runnable: usize,
    agree: [usize; 4],
    frames: usize,
    frames_agree: [usize; 4],
    rewritten: usize,
    maps_changed: usize,
    map_checks: usize,
    ring_records: usize,
}

impl Tally {
    /// Counts one program.
    pub fn add(&mut self, r: ProgResult) {
        self.programs += 1;
        self.kernel += usize::from(r.kernel.is_none());
        self.onic += usize::from(r.onic.is_none());
        if r.kernel.is_some() || r.onic.is_some() {
            return;
        }
        self.both += 1;
        if r.compared == 0 {
            return;
        }
        self.runnable += 1;
        self.frames += r.compared;
        self.rewritten += r.rewritten;
        self.maps_changed += r.maps_changed;
        self.map_checks += r.map_checks;
        self.ring_records += r.ring_records;
        for (i, n) in [r.verdict, r.bytes, r.maps, r.records].into_iter().enumerate() {
            self.agree[i] += usize::from(n == 0);
            self.frames_agree[i] += r.compared - n;
        }
    }

    /// Prints the summary table.
    pub fn print(&self) {
        let compiled = self.sources - self.compile_failed.len();
        println!();
        for f in &self.compile_failed {
            println!("did not compile: {}", short(f));
        }
        println!();
        println!("| what | count |");
        println!("|---|---|");
        println!("| objects (sources and prebuilt) | {} |", self.sources);
        println!("| compiled | {compiled} |");
        println!("| XDP programs in them | {} |", self.programs);
        println!("| other programs (not compared) | {} |", self.other);
        println!("| kernel loads | {} |", self.kernel);
        println!("| onic loads | {} |", self.onic);
        println!("| both load | {} |", self.both);
        println!("| both load and the kernel test-runs them | {} |", self.runnable);
        for (i, what) in ["verdict", "byte", "map", "ring record"].iter().enumerate() {
            println!(
                "| {what} agreement: programs (frames) | {}/{} ({}/{}) |",
                self.agree[i], self.runnable, self.frames_agree[i], self.frames
            );
        }
        println!(
            "| frames the kernel's run rewrote (bytes or metadata) | {} of {} |",
            self.rewritten, self.frames
        );
        println!(
            "| frames after which the kernel's maps had changed | {} of {} |",
            self.maps_changed, self.frames
        );
        println!(
            "| map comparisons (one map after one frame) | {} |",
            self.map_checks
        );
        println!(
            "| ring buffer records the kernel's runs wrote (each compared) | {} |",
            self.ring_records
        );
        println!();
    }
}
