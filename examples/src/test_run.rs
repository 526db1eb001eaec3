//! `onic run --xdp-obj FILE.o --test-run`: each frame of the capture (or of the sample mix) is
//! handed to the program the way the kernel's `BPF_PROG_TEST_RUN` hands it (Linux 6.1,
//! `bpf_prog_test_run_xdp`), with no MAC, shell or driver in front of it: a zeroed buffer of a
//! page, the frame after a headroom of 256 bytes (`XDP_PACKET_HEADROOM`), 320 bytes kept free at
//! the end (`skb_shared_info`), on RX queue 0 of the port `--port` names. Runts and frames above
//! 1514 bytes reach the program, where a replay through the model drops them at the MAC.
//!
//! What the kernel's test run refuses, this mode refuses too, frame by frame: a frame shorter
//! than an Ethernet header (14 bytes, `ETH_HLEN`: `EINVAL`). A frame longer than the page's
//! linear part (4096 - 256 - 320 = 3520 bytes) the kernel splits, the rest in fragment pages
//! (a multi-buffer frame); the engine has no fragments, so such a frame is refused and counted.
//!
//! As in the kernel's test run without `BPF_F_TEST_XDP_LIVE_FRAMES`, nothing is sent: each frame
//! gives a verdict and the bytes the program left, a redirect names its target and is not carried
//! out. Outputs in `--out-dir`:
//!
//! | file | what |
//! | --- | --- |
//! | `test-run.pcap` | every frame the program ran on, as it left it (the kernel's `data_out`), in input order |
//! | `test-run.txt` | one line per input frame: its number (from 1), the verdict, the output length, then `meta` and the metadata in hex if the program left some, or `to` and the redirect's target; a refused frame's line says why |
//! | `bpf-records.txt` | records the program wrote into ring buffers and perf event arrays |

use std::io::Write as _;

use onic_core::config::{RX_HEADROOM, RX_TAILROOM};
use onic_core::xdp::{RawXdpProgram, XdpAction, XdpBuff, XdpRxq, ETH_HLEN};

use crate::replay::{ReplayOpts, Source};
use crate::xdp_obj::{ObjEngine, Target};

/// The page a test run's buffer spans.
const PAGE: usize = 4096;
/// Longest frame the page's linear part holds.
pub const MAX_LINEAR: usize = PAGE - RX_HEADROOM as usize - RX_TAILROOM as usize;
/// The capture of the frames as the program left them.
const CAPTURE: &str = "test-run.pcap";
/// The verdict of each frame.
const VERDICTS: &str = "test-run.txt";

/// What the frames came to, counted.
#[derive(Default)]
struct Counts {
    /// Frames run, by verdict (aborted, drop, pass, tx, redirect; any other value last).
    verdicts: [u64; 6],
    /// Frames refused: shorter than `ETH_HLEN`, longer than [`MAX_LINEAR`].
    short: u64,
    long: u64,
}

/// Runs the program of `args` on every frame of `source` as the kernel's test run would.
///
/// # Errors
///
/// The object cannot be loaded, an output cannot be written, the run reached `--insn-total`.
pub fn run(args: &ReplayOpts, mut source: Source, source_name: &str) -> Result<(), String> {
    check(args)?;
    let path = args.obj.xdp_obj.as_deref().ok_or("--test-run needs --xdp-obj")?;
    let mut e = crate::xdp_obj::load(&args.obj, path)?;
    let mut capture = onic_cli::pcap::Writer::create(&args.out_dir.join(CAPTURE))?;
    let txt = args.out_dir.join(VERDICTS);
    let f = std::fs::File::create(&txt).map_err(|err| format!("{}: {err}", txt.display()))?;
    let mut lines = std::io::BufWriter::new(f);
    let mut counts = Counts::default();
    let mut n = 0u64;
    while let Some((ts, data)) = source.next()? {
        n += 1;
        e.engine.host_mut().now_ns = u64::try_from(ts.as_nanos()).unwrap_or(u64::MAX);
        let line = match test_run_one(&mut e, args.port, &data, &mut counts) {
            Ok((out, text)) => {
                capture.record(ts, &out)?;
                text
            }
            Err(why) => why,
        };
        writeln!(lines, "{n} {line}").map_err(|err| format!("{VERDICTS}: {err}"))?;
        e.check()?;
    }
    lines.flush().map_err(|err| format!("{VERDICTS}: {err}"))?;
    let ran = capture.records;
    capture.finish()?;
    let [aborted, drop, pass, tx, redirect, other] = counts.verdicts;
    outln!(
        "test run (as BPF_PROG_TEST_RUN: no MAC, no driver, nothing sent): {n} frames from {source_name} into port {}; {} of {}",
        args.port,
        e.engine.program().name(),
        path.display()
    );
    outln!("  verdicts: aborted {aborted} drop {drop} pass {pass} tx {tx} redirect {redirect} other {other}");
    outln!(
        "  refused: {} shorter than {ETH_HLEN} bytes (the kernel's test run: EINVAL), {} longer than {MAX_LINEAR} bytes (the kernel puts the rest in fragment pages; the engine has none)",
        counts.short,
        counts.long
    );
    crate::xdp_obj::report(
        &e,
        args.obj.dump_maps.as_deref(),
        Some(&args.out_dir.join(crate::xdp_obj::RECORDS_FILE)),
    )?;
    outln!("output in {}:", args.out_dir.display());
    outln!("  {CAPTURE:<14} {ran:>8} frames as the program left them");
    outln!("  {VERDICTS:<14} {n:>8} lines, one per input frame");
    Ok(())
}

/// Checks the output directory and files before anything runs.
fn check(args: &ReplayOpts) -> Result<(), String> {
    onic_cli::limits::writable_dir(&args.out_dir, "--out-dir")?;
    for name in [CAPTURE, VERDICTS, crate::xdp_obj::RECORDS_FILE] {
        onic_cli::file::check_output(&args.out_dir.join(name), "--out-dir")?;
    }
    Ok(())
}

/// Runs the program on one frame in a fresh buffer: the frame as the program left it and the
/// line of `test-run.txt` after the frame's number, or the line of a refused frame.
fn test_run_one(
    e: &mut ObjEngine,
    port: u8,
    data: &[u8],
    counts: &mut Counts,
) -> Result<(Vec<u8>, String), String> {
    if data.len() < ETH_HLEN {
        counts.short += 1;
        return Err(format!(
            "refused: {} bytes, shorter than an Ethernet header ({ETH_HLEN}); the kernel's test run answers EINVAL",
            data.len()
        ));
    }
    if data.len() > MAX_LINEAR {
        counts.long += 1;
        return Err(format!(
            "refused: {} bytes, longer than a page's linear part ({MAX_LINEAR}); the kernel's test run puts the rest in fragment pages, which the engine does not model",
            data.len()
        ));
    }
    let mut page = vec![0u8; PAGE];
    let at = RX_HEADROOM as usize;
    page[at..at + data.len()].copy_from_slice(data);
    let rxq = XdpRxq { queue_index: 0, port };
    let mut x = XdpBuff::new(&mut page, at, data.len(), rxq).map_err(|err| format!("refused: {err:?}"))?;
    let raw = e.run_raw(&mut x);
    let action = XdpAction::from_raw(raw);
    let slot = action.map_or(5, |a| a.raw() as usize);
    counts.verdicts[slot.min(5)] += 1;
    let mut line = format!(
        "{} {}",
        action.map_or_else(|| format!("verdict {raw}"), verdict_name),
        x.len()
    );
    if action == Some(XdpAction::Redirect) {
        line.push_str(&format!(" to {}", describe(Target::of(x.redirect_target()))));
    }
    if !x.meta().is_empty() {
        let hex: String = x.meta().iter().map(|b| format!("{b:02x}")).collect();
        line.push_str(&format!(" meta {hex}"));
    }
    Ok((x.data().to_vec(), line))
}

/// A verdict as the kernel names it.
fn verdict_name(a: XdpAction) -> String {
    match a {
        XdpAction::Aborted => "XDP_ABORTED",
        XdpAction::Drop => "XDP_DROP",
        XdpAction::Pass => "XDP_PASS",
        XdpAction::Tx => "XDP_TX",
        XdpAction::Redirect => "XDP_REDIRECT",
    }
    .to_string()
}

/// A redirect's target, in words.
fn describe(t: Target) -> String {
    match t {
        Target::OtherPort => "the other port".into(),
        Target::Hairpin => "the ingress port (hairpin)".into(),
        Target::Xsk => "the AF_XDP socket".into(),
        Target::Cpu(c) => format!("CPU {c} (cpumap)"),
        Target::Broadcast(m) => {
            let ports: Vec<String> = (0..2)
                .filter(|p| m & (1 << p) != 0)
                .map(|p: u8| p.to_string())
                .collect();
            format!("ports [{}] (broadcast)", ports.join(","))
        }
        Target::Unknown => "an interface the model lacks (a failed redirect)".into(),
    }
}
