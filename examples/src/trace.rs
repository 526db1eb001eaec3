//! `onic trace`: the register accesses the driver makes for a scenario, printed in the recording
//! bus format (`W|R <bar> 0x<offset> 0x<value>`, bar 0 = QDMA, bar 2 = shell).

use clap::{Args, Subcommand};
use onic_core::config::{BufSizeIdx, DeviceConfig, RingSizeIdx, RxQueueConfig, TxQueueConfig};
use onic_core::device::rss_control::{HashFunction, Rss};
use onic_core::rss::PublishedHasher;
use onic_core::{Device, QueueControl, QueueId};
use onic_hal::grace::TakingTurns;
use onic_hal::recording::{opennic_presets, Recorder, RecordingWindow};
use onic_hal::{Bar, DelayNs, DmaAddr};

/// A delay that returns at once: the recording bus completes every operation immediately.
pub struct NoDelay;

impl DelayNs for NoDelay {
    fn delay_ns(&mut self, _ns: u32) {}
}

fn presets_help() -> String {
    let mut s = String::from(
        "Presets of the recording bus (every other register reads its last written value, or 0):\n",
    );
    let mut seen = Vec::new();
    for p in opennic_presets() {
        if !seen.contains(&p.name) {
            seen.push(p.name);
            s.push_str("  - ");
            s.push_str(p.name);
            s.push('\n');
        }
    }
    s.push_str(
        "\nOutput: one access per line, `W <bar> 0x<offset> 0x<value>` or `R <bar> 0x<offset> 0x<value read>`,\n\
         bar 0 = QDMA (BAR0), bar 2 = shell (BAR2), offsets from the BAR start. Queue scenarios bring the\n\
         device up first and print only the scenario's own accesses unless --with-init is given.",
    );
    s
}

/// Arguments of `onic trace`.
#[derive(Args)]
#[command(after_long_help = presets_help(), after_help = presets_help())]
pub struct TraceArgs {
    #[command(subcommand)]
    scenario: Scenario,
}

/// The device a scenario runs on.
#[derive(Args, Clone, Copy)]
pub struct DeviceOpts {
    /// PCI function (0 = master PF, 1..3).
    #[arg(long, default_value_t = 0)]
    pf: u8,
    /// Queue pairs of the function (1..=64).
    #[arg(long, default_value_t = 8)]
    queues: u16,
    /// Leave RS-FEC off when enabling the CMACs.
    #[arg(long)]
    no_rs_fec: bool,
    /// Also print the device bring-up that precedes a queue scenario.
    #[arg(long)]
    with_init: bool,
}

#[derive(Subcommand)]
enum Scenario {
    /// Device bring-up of one PCI function (FMAP, QCONF, indirection table, global CSRs and CMAC
    /// enable on the master PF, error interrupt).
    Init {
        #[command(flatten)]
        dev: DeviceOpts,
    },
    /// Device removal: error interrupt disarm (master PF), QCONF = qbase with numq 0, FMAP clear.
    Remove {
        #[command(flatten)]
        dev: DeviceOpts,
    },
    /// TX (H2C) queue contexts, optionally followed by their teardown.
    TxInit {
        #[command(flatten)]
        dev: DeviceOpts,
        /// Function-relative queue index.
        #[arg(long, default_value_t = 0)]
        qid: u16,
        /// GLBL_RNG_SZ index of the descriptor ring (0 = 4096 entries).
        #[arg(long, default_value_t = 0)]
        ring_size_idx: u8,
        /// DMA address of the descriptor ring (4 KiB aligned).
        #[arg(long, value_parser = parse_u64, default_value = "0x10000000")]
        ring: u64,
        /// MSI-X vector (defaults to the queue index).
        #[arg(long)]
        vector: Option<u16>,
        /// Also tear the queue down.
        #[arg(long)]
        teardown: bool,
    },
    /// RX (C2H + CMPT) queue contexts and the initial doorbells, optionally followed by teardown.
    RxInit {
        #[command(flatten)]
        dev: DeviceOpts,
        /// Function-relative queue index.
        #[arg(long, default_value_t = 0)]
        qid: u16,
        /// C2H_BUF_SZ index (must fit a page behind the 256-byte headroom).
        #[arg(long, default_value_t = onic_core::config::RX_BUF_SIZE_INDEX_DEFAULT)]
        buf_size_idx: u8,
        /// GLBL_RNG_SZ index of the C2H descriptor ring.
        #[arg(long, default_value_t = 8)]
        desc_ring_size_idx: u8,
        /// GLBL_RNG_SZ index of the completion ring.
        #[arg(long, default_value_t = 8)]
        cmpt_ring_size_idx: u8,
        /// Completion entry size in bytes (8, 16, 32, 64).
        #[arg(long, default_value_t = 8)]
        cmpt_entry_size: u16,
        /// DMA address of the C2H descriptor ring (4 KiB aligned).
        #[arg(long, value_parser = parse_u64, default_value = "0x10000000")]
        desc_ring: u64,
        /// DMA address of the completion ring (4 KiB aligned).
        #[arg(long, value_parser = parse_u64, default_value = "0x10002000")]
        cmpt_ring: u64,
        /// MSI-X vector (defaults to the queue index).
        #[arg(long)]
        vector: Option<u16>,
        /// Descriptors handed to the device by the initial C2H PIDX doorbell.
        #[arg(long, default_value_t = 256)]
        c2h_pidx: u16,
        /// Also tear the queue down.
        #[arg(long)]
        teardown: bool,
    },
    /// A single doorbell write.
    Doorbell {
        #[command(flatten)]
        dev: DeviceOpts,
        /// Which doorbell.
        #[arg(value_enum)]
        kind: DoorbellKind,
        /// Function-relative queue index.
        #[arg(long, default_value_t = 0)]
        qid: u16,
        /// The producer (h2c, c2h) or consumer (cmpt) index.
        #[arg(long)]
        index: u16,
        /// For cmpt: do not re-arm the interrupt.
        #[arg(long)]
        no_arm: bool,
    },
    /// `ethtool -X`: indirection table and/or hash key, validated first, then written.
    RssSet {
        #[command(flatten)]
        dev: DeviceOpts,
        /// All 128 table entries, comma separated (function-relative queue indices).
        #[arg(long, value_delimiter = ',', conflicts_with_all = ["equal", "weights", "default"])]
        table: Option<Vec<u16>>,
        /// Spread over the first N queues (`equal N`).
        #[arg(long, conflicts_with_all = ["weights", "default"])]
        equal: Option<u16>,
        /// Spread by weights (`weight w0 w1 ...`), comma separated.
        #[arg(long, value_delimiter = ',', conflicts_with = "default")]
        weights: Option<Vec<u32>>,
        /// Back to the default table, entry k = k mod queues in use (`ethtool -X default`).
        #[arg(long)]
        default: bool,
        /// The 40-byte key as 80 hex digits (colons allowed, as ethtool prints it).
        #[arg(long)]
        key: Option<String>,
        /// Hash function: `toeplitz` or `no-change` (anything else is refused, as ethtool would).
        #[arg(long, default_value = "no-change")]
        hfunc: String,
    },
    /// `ethtool -x`: read back the indirection table and the key.
    RssGet {
        #[command(flatten)]
        dev: DeviceOpts,
    },
    /// The ethtool statistics read: TICK, then every CMAC and packet-adapter counter.
    Stats {
        #[command(flatten)]
        dev: DeviceOpts,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DoorbellKind {
    /// H2C descriptor PIDX (TX).
    H2c,
    /// C2H descriptor PIDX (RX buffers).
    C2h,
    /// Completion CIDX with the driver's trigger settings.
    Cmpt,
}

pub fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => s.replace('_', "").parse(),
    };
    r.map_err(|e| format!("`{s}` is not a number: {e}"))
}

type RecDevice<'a> = Device<RecordingWindow<'a>, RecordingWindow<'a>>;

/// The device, and its RSS state for the scenarios that change it.
fn bring_up<'a>(rec: &'a Recorder, opts: &DeviceOpts) -> Result<(RecDevice<'a>, Rss), String> {
    let mut cfg = DeviceConfig::new(opts.pf, opts.queues).map_err(|e| e.to_string())?;
    cfg.rs_fec = !opts.no_rs_fec;
    let up = Device::init(rec.window(Bar::Qdma), rec.window(Bar::Shell), &mut NoDelay, cfg)
        .map_err(|e| e.to_string())?;
    if !opts.with_init {
        rec.take_log();
    }
    Ok(up)
}

/// Runs a scenario on a fresh recording bus and returns the trace text.
pub fn trace(args: &TraceArgs) -> Result<String, String> {
    let rec = Recorder::opennic();
    let d = &mut NoDelay;
    match &args.scenario {
        Scenario::Init { dev } => {
            let opts = DeviceOpts {
                with_init: true,
                ..*dev
            };
            bring_up(&rec, &opts)?;
        }
        Scenario::Remove { dev } => {
            let (device, _) = bring_up(&rec, dev)?;
            let (r, _, _) = device.teardown(d);
            r.map_err(|e| e.to_string())?;
        }
        Scenario::TxInit {
            dev,
            qid,
            ring_size_idx,
            ring,
            vector,
            teardown,
        } => {
            let (device, _) = bring_up(&rec, dev)?;
            let ring_size = RingSizeIdx::new(*ring_size_idx).map_err(|e| e.to_string())?;
            let q = TxQueueConfig {
                qid: QueueId::new(*qid),
                ring: ring_size,
                vector: vector.unwrap_or(*qid),
            };
            tx_init(&device, &q, DmaAddr::new(*ring), *teardown)?;
        }
        Scenario::RxInit {
            dev,
            qid,
            buf_size_idx,
            desc_ring_size_idx,
            cmpt_ring_size_idx,
            cmpt_entry_size,
            desc_ring,
            cmpt_ring,
            vector,
            c2h_pidx,
            teardown,
        } => {
            let (device, _) = bring_up(&rec, dev)?;
            let q = rx_queue_config(
                *qid,
                *buf_size_idx,
                (*desc_ring_size_idx, *cmpt_ring_size_idx),
                *cmpt_entry_size,
                vector.unwrap_or(*qid),
            )?;
            let (desc, cmpt) = (DmaAddr::new(*desc_ring), DmaAddr::new(*cmpt_ring));
            let r = device.init_rx_queue(d, &q, desc, cmpt, *c2h_pidx);
            r.map_err(|e| e.to_string())?;
            if *teardown {
                device
                    .teardown_rx_queue(d, QueueId::new(*qid))
                    .map_err(|e| e.to_string())?;
            }
        }
        Scenario::Doorbell {
            dev,
            kind,
            qid,
            index,
            no_arm,
        } => {
            let (device, _) = bring_up(&rec, dev)?;
            ring_doorbell(&device, *kind, *qid, *index, !*no_arm)?;
        }
        Scenario::RssSet {
            dev,
            table,
            equal,
            weights,
            default,
            key,
            hfunc,
        } => {
            let (device, mut rss) = bring_up(&rec, dev)?;
            let spread = (table.as_deref(), *equal, weights.as_deref(), *default);
            rss_set(&device, &mut rss, spread, key.as_deref(), hfunc)?;
        }
        Scenario::RssGet { dev } => {
            let (device, _) = bring_up(&rec, dev)?;
            let _ = device.rss_read_back();
        }
        Scenario::Stats { dev } => {
            let (device, _) = bring_up(&rec, dev)?;
            device.hw_counters();
        }
    }
    Ok(rec.log_text())
}

/// A TX queue's contexts programmed (and, with `teardown`, invalidated again).
fn tx_init(device: &RecDevice<'_>, q: &TxQueueConfig, ring: DmaAddr, teardown: bool) -> Result<(), String> {
    let d = &mut NoDelay;
    device.init_tx_queue(d, q, ring).map_err(|e| e.to_string())?;
    if teardown {
        device.teardown_tx_queue(d, q.qid).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `ethtool -X`: the table (given, an equal spread, weights or the default), then key and hash
/// function, through the function's one RSS owner.
fn rss_set(
    device: &RecDevice<'_>,
    rss: &mut Rss,
    spread: RssSpread<'_>,
    key: Option<&str>,
    hfunc: &str,
) -> Result<(), String> {
    let (table, equal, weights, default) = spread;
    let hfunc = match hfunc {
        "toeplitz" => HashFunction::Toeplitz,
        "no-change" => HashFunction::NoChange,
        other => HashFunction::Other(other.parse().map_err(|_| {
            format!(
                "--hfunc {other}: not a hash function (toeplitz, no-change, or a function number 0..=255)"
            )
        })?),
    };
    let key = key.map(crate::rss::parse_hex).transpose()?;
    // No datapath runs under the trace; the hasher a key change publishes is read by nobody.
    let soft = Box::new(PublishedHasher::new(rss.config().key()));
    let set = |rss: &mut Rss, t| rss.set(device, &soft, &TakingTurns, t, key.as_deref(), hfunc);
    let r = match (table, equal, weights) {
        _ if default => set(rss, None).and_then(|_| rss.reset(device)),
        (_, Some(n), _) => set(rss, None).and_then(|_| rss.equal(device, n)),
        (_, _, Some(w)) => set(rss, None).and_then(|_| rss.weights(device, w)),
        (t, None, None) => set(rss, t),
    };
    r.map(|_| ()).map_err(|e| e.to_string())
}

/// How `rss-set` asks for the table: explicit entries, `equal N`, weights, or the default.
type RssSpread<'a> = (Option<&'a [u16]>, Option<u16>, Option<&'a [u32]>, bool);

/// An RX queue's configuration from the command line's size indices (each checked).
fn rx_queue_config(
    qid: u16,
    buf_size_idx: u8,
    (desc_ring_size_idx, cmpt_ring_size_idx): (u8, u8),
    cmpt_entry_size: u16,
    vector: u16,
) -> Result<RxQueueConfig, String> {
    Ok(RxQueueConfig {
        qid: QueueId::new(qid),
        buf: BufSizeIdx::new(buf_size_idx).map_err(|e| e.to_string())?,
        desc_ring: RingSizeIdx::new(desc_ring_size_idx).map_err(|e| e.to_string())?,
        cmpt_ring: RingSizeIdx::new(cmpt_ring_size_idx).map_err(|e| e.to_string())?,
        cmpt_entry: onic_core::config::cmpt_entry_size(cmpt_entry_size).map_err(|e| e.to_string())?,
        vector,
    })
}

/// One doorbell write of a queue the function owns.
fn ring_doorbell(
    device: &RecDevice<'_>,
    kind: DoorbellKind,
    qid: u16,
    index: u16,
    arm: bool,
) -> Result<(), String> {
    device
        .config()
        .check_queue(QueueId::new(qid))
        .map_err(|e| e.to_string())?;
    let db = device.doorbells();
    match kind {
        DoorbellKind::H2c => db.h2c_pidx(QueueId::new(qid), index),
        DoorbellKind::C2h => db.c2h_pidx(QueueId::new(qid), index),
        DoorbellKind::Cmpt => db.cmpt_cidx(QueueId::new(qid), index, arm),
    }
    Ok(())
}

pub fn run(args: &TraceArgs) -> Result<(), String> {
    out!("{}", trace(args)?);
    Ok(())
}
