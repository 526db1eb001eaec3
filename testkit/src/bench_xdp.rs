//! The driver-only XDP workloads of `onic bench xdp` (and of the criterion bench `datapath`,
//! group `xdp`): the RX path with a native program attached, through
//! [`onic_core::QueuePair::poll`], beside the plain RX drop path of the same rig.
//!
//! # Method
//!
//! As the driver-only RX figures ([`crate::bench`]): the device side of an [`RxRig`] built with
//! [`RxRigConfig::xdp`] completes [`XDP_ROUND`] frames per round (the frame bytes written into
//! the pages, so that programs and the hash read real headers) and, after the round, writes the
//! TX status records as if everything queued had been sent; neither is timed. What is timed is
//! [`RxRig::poll_all_with`]: the polls until the queue caught up and re-armed, with everything the
//! verdicts cost the driver on this core:
//!
//! - DROP: the program, the page back into its slot;
//! - PASS: the program, the page to the OS and back (`return_from_os`) after each poll, a spare
//!   page into the slot;
//! - TX: the program swaps the MAC addresses, the frame goes out on the pair's own TX queue (one
//!   doorbell per poll), the next poll's reclaim recycles the page;
//! - TX, untouched: as TX with a program that does not read or write the frame, so that the
//!   driver's share of XDP_TX can be told from what the program's access to the frame costs
//!   (see docs/benchmarks.md);
//! - REDIRECT: the frame is queued on the redirect target (a TX queue standing for another
//!   port's), flushed once per poll; the target's reclaim after the polls returns the pages
//!   through their pool's recycle ring, from which the pool's cache refills;
//! - DROP with the RX hash: as DROP, with the shell hash and its type computed for every frame
//!   and read by the program, once by `onic-core`'s table path and once by `onic-accel`.
//!
//! Rounds are one NAPI budget (64 frames): the redirected pages of one round must fit the pool's
//! recycle ring (128 pages), as they do when completions keep up with a NAPI poll. The RX drop
//! path of the same table runs the same rig (data written, same rounds) with no XDP at all.

use std::hint::black_box;
use std::time::{Duration, Instant};

use onic_accel::{AccelHasher, Backend};
use onic_core::rss::{RssKey, RxHasher, ShellHasher};
use onic_core::xdp::{swap_macs, RawXdpProgram, XdpAction, XdpBuff};

use crate::bench::{measure, rx_drop_driver_only, timer_overhead, Figure, Method, Sample, COMPARE_SIZES};
use crate::hostdma::HostDma;
use crate::rig::{xdp_pool, DoorbellLatch, HostPool, RxRig, RxRigConfig, RxSlots};

/// Frames per queue per round of the XDP workloads (one NAPI budget).
pub const XDP_ROUND: usize = 64;

/// A verdict path of the driver-only XDP figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpPath {
    /// XDP_DROP.
    Drop,
    /// XDP_PASS.
    Pass,
    /// XDP_TX after swapping the MAC addresses.
    Tx,
    /// XDP_TX from a program that does not touch the frame: the driver's part of XDP_TX alone,
    /// without the program's first access to the frame's header line.
    TxUntouched,
    /// XDP_REDIRECT to the target.
    Redirect,
    /// XDP_DROP after reading the RX hash, computed for every frame by the table path
    /// (`onic_core::rss::ShellHasher`).
    DropWithHash,
    /// The same with the hash from `onic-accel`'s carry-less multiplication (its `Clmul` backend
    /// where the CPU has PCLMULQDQ, else the backend it chooses).
    DropWithHashAccel,
}

/// The paths, with the names their figures carry.
pub const XDP_PATHS: [(&str, XdpPath); 7] = [
    ("drop", XdpPath::Drop),
    ("pass", XdpPath::Pass),
    ("tx", XdpPath::Tx),
    ("tx_untouched", XdpPath::TxUntouched),
    ("redirect", XdpPath::Redirect),
    ("drop_rx_hash", XdpPath::DropWithHash),
    ("drop_rx_hash_clmul", XdpPath::DropWithHashAccel),
];

/// The rig settings of the XDP figures at `wire_len` bytes on the wire (FCS included).
#[must_use]
pub fn xdp_rig_config(wire_len: usize, xdp: bool) -> RxRigConfig {
    RxRigConfig {
        frame_len: u16::try_from(wire_len.saturating_sub(onic_sim::FCS_LEN)).unwrap_or(u16::MAX),
        write_data: true,
        xdp,
        round: XDP_ROUND,
        ..RxRigConfig::new()
    }
}

/// Rounds of an XDP rig with `prog`: produce (not timed), poll (timed), complete TX (not timed).
fn xdp_rounds<'a, Prog: RawXdpProgram>(
    rig: &mut RxRig<'a, HostPool<'a>>,
    prog: &mut Prog,
    hasher: Option<&dyn RxHasher>,
    rounds: u64,
    overhead: Duration,
) -> (Duration, u64) {
    let mut timed = Duration::ZERO;
    let mut frames = 0u64;
    for _ in 0..rounds {
        let n = rig.produce(XDP_ROUND);
        let t = Instant::now();
        let got = rig.poll_all_with(prog, hasher);
        timed += t.elapsed().saturating_sub(overhead);
        rig.complete_tx();
        assert_eq!(got, n, "the driver consumed what the device completed");
        frames += got as u64;
    }
    (timed, frames)
}

/// [`measure`] of [`xdp_rounds`], after `warm` rounds that are neither timed nor counted: the
/// first pass through the rings does work a steady flow does not (the TX queue's slots are empty
/// until XDP_TX frames park pages there, so every XDP_TX frame of that pass takes a fresh page
/// from the allocator). Without them the calibration timed that pass and chose repetitions of a
/// few hundred frames. None with [`Method::rounds`], which runs exactly that many rounds.
fn measure_xdp<'a, Prog: RawXdpProgram>(
    m: &Method,
    warm: u64,
    rig: &mut RxRig<'a, HostPool<'a>>,
    prog: &mut Prog,
    hasher: Option<&dyn RxHasher>,
    overhead: Duration,
) -> Sample {
    if m.rounds.is_none() {
        let _ = xdp_rounds(rig, prog, hasher, warm, overhead);
    }
    measure(m, |r| xdp_rounds(rig, prog, hasher, r, overhead))
}

/// Nanoseconds per frame of `path` at `wire_len` bytes, driver only (see the module docs).
///
/// # Panics
///
/// If the rig cannot be built, or the verdict's path failed for a frame (a bug).
pub fn xdp_driver_only(m: &Method, path: XdpPath, wire_len: usize) -> Sample {
    let cfg = xdp_rig_config(wire_len, true);
    // Rounds enough for every ring to go round once.
    let warm = u64::from(cfg.ring.usable()) / XDP_ROUND as u64 + 2;
    let dma = HostDma::new();
    let latch = DoorbellLatch::new();
    let mut slots = RxSlots::new(&cfg);
    let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, xdp_pool).expect("xdp rig");
    let overhead = timer_overhead();
    let hasher = ShellHasher::default();
    let accel = AccelHasher::with_backend(&RssKey::DEFAULT, Backend::Clmul).unwrap_or_default();
    let s = match path {
        XdpPath::Drop => {
            let mut p = |_: &mut XdpBuff<'_>| XdpAction::Drop;
            measure_xdp(m, warm, &mut rig, &mut p, None, overhead)
        }
        XdpPath::Pass => {
            let mut p = |_: &mut XdpBuff<'_>| XdpAction::Pass;
            measure_xdp(m, warm, &mut rig, &mut p, None, overhead)
        }
        XdpPath::Tx => {
            let mut p = |x: &mut XdpBuff<'_>| {
                swap_macs(x.data_mut());
                XdpAction::Tx
            };
            measure_xdp(m, warm, &mut rig, &mut p, None, overhead)
        }
        XdpPath::TxUntouched => {
            let mut p = |_: &mut XdpBuff<'_>| XdpAction::Tx;
            measure_xdp(m, warm, &mut rig, &mut p, None, overhead)
        }
        XdpPath::Redirect => {
            let mut p = |x: &mut XdpBuff<'_>| x.redirect(0);
            measure_xdp(m, warm, &mut rig, &mut p, None, overhead)
        }
        XdpPath::DropWithHash | XdpPath::DropWithHashAccel => {
            let mut p = |x: &mut XdpBuff<'_>| {
                black_box(x.rx_hash().map(|h| h.value).unwrap_or(0));
                XdpAction::Drop
            };
            let h: &dyn RxHasher = if path == XdpPath::DropWithHash {
                &hasher
            } else {
                &accel
            };
            measure_xdp(m, warm, &mut rig, &mut p, Some(h), overhead)
        }
    };
    check_verdicts(&rig, path);
    drop(rig.finish());
    assert_eq!(dma.stats().live_pages, 0, "every page came back");
    s
}

/// Every frame took the verdict's path: no TX or redirect failure, nothing aborted.
fn check_verdicts<'a>(rig: &RxRig<'a, HostPool<'a>>, path: XdpPath) {
    for q in &rig.queues {
        let s = q.pair.stats();
        let rx = q.pair.rx.stats();
        assert_eq!(rx.rx_dropped(), 0, "{path:?}: no RX drops");
        assert_eq!(
            (
                s.rx_xdp_tx_errors,
                s.rx_xdp_redirect_errors,
                s.rx_xdp_aborted,
                s.rx_pass_refused
            ),
            (0, 0, 0, 0),
            "{path:?}: every verdict carried out"
        );
        let taken = match path {
            XdpPath::Drop | XdpPath::DropWithHash | XdpPath::DropWithHashAccel => s.rx_xdp_drop,
            XdpPath::Pass => s.rx_xdp_pass,
            XdpPath::Tx | XdpPath::TxUntouched => s.rx_xdp_tx,
            XdpPath::Redirect => s.rx_xdp_redirect,
        };
        assert_eq!(taken, rx.rx_packets, "{path:?}: every frame took the path");
    }
}

/// Group `xdp` (driver only): the RX drop path without XDP, then each verdict's path, at every
/// size of [`COMPARE_SIZES`]; Mpps and ns per frame.
#[must_use]
pub fn xdp(m: &Method) -> Vec<Figure> {
    let mut out = Vec::new();
    for size in COMPARE_SIZES {
        let name = format!("xdp_driver_only_rx_drop_{size}B");
        if m.wants(&name) {
            let s = rx_drop_driver_only(m, xdp_rig_config(size, false));
            push(&mut out, &name, s);
        }
        for (verdict, path) in XDP_PATHS {
            let name = format!("xdp_driver_only_{verdict}_{size}B");
            if m.wants(&name) {
                push(&mut out, &name, xdp_driver_only(m, path, size));
            }
        }
    }
    out
}

fn push(out: &mut Vec<Figure>, name: &str, s: Sample) {
    out.push(Figure::mops(name, "Mpps", s));
    out.push(Figure::ns(format!("{name}_per_frame"), "ns/frame", s));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path runs, takes its verdict for every frame and loses no page (a tiny method: this
    /// checks the code, not the speed).
    #[test]
    fn every_path_runs_and_returns_every_page() {
        let m = Method {
            rep: Duration::from_millis(1),
            reps: 1,
            ..Method::default()
        };
        for (_, path) in XDP_PATHS {
            for size in [64, 1518] {
                let s = xdp_driver_only(&m, path, size);
                assert!(s.best > 0.0 && s.ops > 0, "{path:?} {size}: {s:?}");
            }
        }
    }
}
